// Streaming Parquet writer for the export tables (parquet_writer.h). The
// format: apache/parquet-format (parquet.thrift, Encodings.md).
#include "analyze/parquet_writer.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <zstd.h>

namespace cptrace {
namespace {

// parquet.thrift's enums, as far as they are used here.
enum PhysicalType { kBoolean = 0, kInt32 = 1, kInt64 = 2, kByteArray = 6 };
enum ConvertedType { kUtf8 = 0, kUint16 = 12, kUint32 = 13, kUint64 = 14, kInt64Converted = 18, kNone = -1 };
enum Encoding { kPlain = 0, kRle = 3, kDeltaBinaryPacked = 5, kRleDictionary = 8 };
enum PageType { kDataPage = 0, kDictionaryPage = 2 };
constexpr int kZstdCodec = 6;
constexpr int kZstdLevel = 1;  // as the .csv.zst tables: the columns are small after encoding

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(v | 0x80);
    v >>= 7;
  }
  out += char(v);
}
uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }

// Thrift's compact protocol, writing only: each field is a header byte (the id
// as a delta from the previous field's, and the type) and its value; integers
// are zigzag varints; a struct ends with a 0 byte.
class Compact {
 public:
  enum Type : uint8_t { kTrue = 1, kFalse = 2, kI32 = 5, kI64 = 6, kBinary = 8, kList = 9, kStruct = 12 };
  std::string out;

  void i32(int id, int64_t v) {
    field(id, kI32);
    varint(out, zigzag(v));
  }
  void i64(int id, int64_t v) {
    field(id, kI64);
    varint(out, zigzag(v));
  }
  void binary(int id, std::string_view s) {
    field(id, kBinary);
    element(s);
  }
  void begin_struct(int id) {
    field(id, kStruct);
    last_.push_back(0);
  }
  // A struct as a list element: no field header.
  void begin_element() { last_.push_back(0); }
  void end_struct() {
    out += '\0';
    last_.pop_back();
  }
  void list(int id, Type elem, size_t n) {
    field(id, kList);
    if (n < 15) {
      out += char(n << 4 | elem);
    } else {
      out += char(0xf0 | elem);
      varint(out, n);
    }
  }
  void element(int64_t v) { varint(out, zigzag(v)); }
  void element(std::string_view s) {
    varint(out, s.size());
    out += s;
  }

 private:
  void field(int id, Type t) {
    int delta = id - last_.back();
    if (delta > 0 && delta <= 15) {
      out += char(delta << 4 | t);
    } else {
      out += char(t);
      varint(out, zigzag(id));
    }
    last_.back() = id;
  }
  std::vector<int> last_{0};
};

// `n` values of `width` bits each (n * width a multiple of 32), least significant bit first.
void bit_pack(const uint64_t* v, size_t n, int width, std::string& out) {
  if (width == 0) return;
  unsigned __int128 acc = 0;
  int bits = 0;
  char word[8];
  for (size_t i = 0; i < n; ++i) {
    acc |= (unsigned __int128)v[i] << bits;
    bits += width;
    if (bits >= 64) {
      uint64_t w = uint64_t(acc);
      std::memcpy(word, &w, 8);
      out.append(word, 8);
      acc >>= 64;
      bits -= 64;
    }
  }
  uint64_t w = uint64_t(acc);
  std::memcpy(word, &w, 8);
  out.append(word, size_t(bits / 8));
}

int bit_width(uint64_t max) { return max ? 64 - __builtin_clzll(max) : 0; }

// DELTA_BINARY_PACKED: blocks of 128 deltas in 4 miniblocks of 32, each
// miniblock bit-packed at its own width after subtracting the block's least
// delta. Deltas wrap around (two's complement) at the physical type's width,
// as the format says; `narrow` is INT32, whose values are the low 32 bits.
void delta_binary_packed(const int64_t* v, size_t n, bool narrow, std::string& out) {
  constexpr size_t kBlock = 128, kMini = 32;
  auto value = [&](size_t i) { return narrow ? int64_t(int32_t(uint32_t(v[i]))) : v[i]; };
  varint(out, kBlock);
  varint(out, kBlock / kMini);
  varint(out, n);
  varint(out, zigzag(n ? value(0) : 0));
  uint64_t d[kBlock];
  for (size_t at = 1; at < n; at += kBlock) {
    const size_t m = std::min(kBlock, n - at);
    int64_t least = INT64_MAX;
    for (size_t j = 0; j < m; ++j) {
      uint64_t diff = uint64_t(value(at + j)) - uint64_t(value(at + j - 1));
      int64_t delta = narrow ? int64_t(int32_t(uint32_t(diff))) : int64_t(diff);
      d[j] = uint64_t(delta);
      least = std::min(least, delta);
    }
    std::fill(d + m, d + kBlock, uint64_t(least));  // padding: packs as 0
    varint(out, zigzag(least));
    int widths[kBlock / kMini];
    for (size_t k = 0; k < kBlock / kMini; ++k) {
      uint64_t all = 0;
      for (size_t j = k * kMini; j < (k + 1) * kMini; ++j) {
        d[j] -= uint64_t(least);
        all |= d[j];
      }
      widths[k] = k * kMini < m ? bit_width(all) : 0;
      out += char(widths[k]);
    }
    // Miniblocks past the last value are not written, only their width (0).
    for (size_t k = 0; k * kMini < m; ++k) bit_pack(d + k * kMini, kMini, widths[k], out);
  }
}

// The RLE / bit-packing hybrid of dictionary codes (after the bit-width byte
// that RLE_DICTIONARY puts first): RLE runs when values repeat (a node's rows
// come in runs), else one bit-packed run of the whole page.
void hybrid(const int64_t* v, size_t n, int width, std::string& out) {
  size_t runs = 0;
  for (size_t i = 0; i < n; ++i) runs += i == 0 || v[i] != v[i - 1];
  const size_t value_bytes = size_t(width + 7) / 8;
  if (runs * (2 + value_bytes) * 8 <= n * size_t(width) + 16) {
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j < n && v[j] == v[i]) ++j;
      varint(out, uint64_t(j - i) << 1);
      uint64_t x = uint64_t(v[i]);
      out.append(reinterpret_cast<const char*>(&x), value_bytes);
      i = j;
    }
    return;
  }
  const size_t groups = (n + 7) / 8;
  varint(out, uint64_t(groups) << 1 | 1);
  uint64_t g[32];
  std::string packed;
  // Groups of 8 values, packed 32 at a time (a whole number of 32-bit words);
  // the last group is padded with zeros, which the value count leaves unread.
  for (size_t at = 0; at < groups * 8; at += 32) {
    size_t m = std::min<size_t>(32, groups * 8 - at);
    for (size_t j = 0; j < 32; ++j) g[j] = at + j < n ? uint64_t(v[at + j]) : 0;
    packed.clear();
    bit_pack(g, 32, width, packed);
    out.append(packed, 0, m * size_t(width) / 8);
  }
}

PhysicalType physical(ParquetWriter::Kind k) {
  switch (k) {
    case ParquetWriter::Kind::Bool:
      return kBoolean;
    case ParquetWriter::Kind::UInt16:
    case ParquetWriter::Kind::UInt32:
      return kInt32;
    case ParquetWriter::Kind::Int64:
    case ParquetWriter::Kind::UInt64:
      return kInt64;
    case ParquetWriter::Kind::String:
      return kByteArray;
  }
  return kInt64;
}

ConvertedType converted(ParquetWriter::Kind k) {
  switch (k) {
    case ParquetWriter::Kind::Bool:
      return kNone;
    case ParquetWriter::Kind::UInt16:
      return kUint16;
    case ParquetWriter::Kind::UInt32:
      return kUint32;
    case ParquetWriter::Kind::Int64:
      return kInt64Converted;
    case ParquetWriter::Kind::UInt64:
      return kUint64;
    case ParquetWriter::Kind::String:
      return kUtf8;
  }
  return kNone;
}

std::vector<int> encodings(const ParquetWriter::ColumnSpec& s) {
  if (s.all_null) return {kPlain, kRle};
  switch (s.kind) {
    case ParquetWriter::Kind::Bool:
      return {kPlain};
    case ParquetWriter::Kind::String:
      return {kPlain, kRleDictionary};
    default:
      return {kDeltaBinaryPacked};
  }
}

}  // namespace

ParquetWriter::Shape ParquetWriter::shape_for(uint64_t memory, size_t columns) {
  Shape s;
  const uint64_t page = memory / 2 / (2 * 8 * std::max<size_t>(columns, 1));  // half for the page values
  s.page_rows = size_t(std::clamp<uint64_t>(page, 1024, kPageRows));
  const uint64_t group = memory / 2 / kPackedRowBytes / s.page_rows;  // the other half for a row group
  s.group_rows = s.page_rows * size_t(std::clamp<uint64_t>(group, 1, kRowGroupRows / s.page_rows));
  return s;
}

ParquetWriter::ParquetWriter(OutFile& out, std::vector<ColumnSpec> columns, bool background, Shape shape)
    : out_(out), shape_(shape) {
  shape_.page_rows = std::max<size_t>(shape_.page_rows, 1);
  shape_.group_rows = std::max(shape_.group_rows / shape_.page_rows, size_t(1)) * shape_.page_rows;
  for (ColumnSpec& s : columns) {
    cols_.push_back(Column{std::move(s), {}, {}, 0, {}, {}, {}, 0});
    if (!cols_.back().spec.all_null) cols_.back().values.reserve(shape_.page_rows);
  }
  zctx_ = ZSTD_createCCtx();
  if (!zctx_) throw std::runtime_error(fmt::format("{}: zstd: cannot create a compression context", out_.path()));
  write("PAR1");
  if (background) worker_ = std::thread([this] { work(); });
}

ParquetWriter::~ParquetWriter() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zctx_));
}

void ParquetWriter::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_rows_ > 0; });
    if (stop_) return;
    const size_t n = job_rows_;
    lock.unlock();
    std::exception_ptr error;
    try {
      encode_pages(n);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    job_rows_ = 0;
    busy_ = false;
    cv_.notify_all();
  }
}

void ParquetWriter::wait_idle() {
  if (!worker_.joinable()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ParquetWriter::encode_pages(size_t n) {
  for (Column& c : cols_) encode_page(c, n);
}

uint32_t ParquetWriter::code(size_t col, std::string_view s) {
  Column& c = cols_[col];
  auto [it, added] = c.dict_index.try_emplace(std::string(s), uint32_t(c.dict.size()));
  if (added) c.dict.emplace_back(s);
  return it->second;
}

void ParquetWriter::write(std::string_view s) {
  out_.write(s);
  offset_ += int64_t(s.size());
}

uint64_t ParquetWriter::append_page(std::string& to, int page_type, std::string_view body, size_t n, int encoding) {
  zbuf_.resize(ZSTD_compressBound(body.size()));
  size_t packed = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zctx_), zbuf_.data(), zbuf_.size(), body.data(),
                                    body.size(), kZstdLevel);
  if (ZSTD_isError(packed))
    throw std::runtime_error(fmt::format("{}: zstd: {}", out_.path(), ZSTD_getErrorName(packed)));
  if (body.size() > INT32_MAX || packed > INT32_MAX)
    throw std::runtime_error(fmt::format("{}: a Parquet page over 2 GiB", out_.path()));
  Compact h;
  h.i32(1, page_type);
  h.i32(2, int64_t(body.size()));
  h.i32(3, int64_t(packed));
  if (page_type == kDataPage) {
    h.begin_struct(5);
    h.i32(1, int64_t(n));
    h.i32(2, encoding);
    h.i32(3, kRle);  // definition levels
    h.i32(4, kRle);  // repetition levels (none: a flat schema)
    h.end_struct();
  } else {
    h.begin_struct(7);
    h.i32(1, int64_t(n));
    h.i32(2, encoding);
    h.end_struct();
  }
  h.out += '\0';
  to += h.out;
  to.append(zbuf_.data(), packed);
  return h.out.size() + body.size();
}

void ParquetWriter::encode_page(Column& c, size_t n) {
  body_.clear();
  int encoding = kPlain;
  if (c.spec.all_null) {
    // Definition levels only (all 0: NULL), RLE with their 4-byte length as a
    // data page of version 1 has them; no values.
    std::string levels;
    varint(levels, uint64_t(n) << 1);
    levels += '\0';
    uint32_t len = uint32_t(levels.size());
    body_.append(reinterpret_cast<const char*>(&len), 4);
    body_ += levels;
  } else if (c.spec.kind == Kind::Bool) {
    body_.assign((n + 7) / 8, '\0');
    for (size_t i = 0; i < n; ++i)
      if (c.encoding[i]) body_[i / 8] = char(body_[i / 8] | 1 << (i % 8));
  } else if (c.spec.kind == Kind::String) {
    encoding = kRleDictionary;
    int width = std::max(bit_width(c.dict_size - 1), 1);
    body_ += char(width);
    hybrid(c.encoding.data(), n, width, body_);
  } else {
    encoding = kDeltaBinaryPacked;
    delta_binary_packed(c.encoding.data(), n, physical(c.spec.kind) == kInt32, body_);
  }
  c.pages_raw += append_page(c.pages, kDataPage, body_, n, encoding);
  c.encoding.clear();
}

void ParquetWriter::end_page() {
  wait_idle();
  for (Column& c : cols_) {
    std::swap(c.values, c.encoding);
    c.dict_size = c.dict.size();
  }
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_rows_ = page_rows_;
      busy_ = true;
    }
    cv_.notify_all();
  } else {
    encode_pages(page_rows_);
  }
  group_rows_ += page_rows_;
  rows_ += page_rows_;
  page_rows_ = 0;
  if (group_rows_ >= shape_.group_rows) end_group();
}

// The row group's column chunks, one after the other: a String column's
// dictionary page (every string seen so far), then its data pages.
void ParquetWriter::end_group() {
  wait_idle();
  if (group_rows_ == 0) return;
  std::vector<ChunkMeta> metas;
  for (Column& c : cols_) {
    ChunkMeta m{offset_, offset_, -1, 0, 0};
    if (c.spec.kind == Kind::String && !c.spec.all_null) {
      body_.clear();
      for (const std::string& s : c.dict) {
        uint32_t len = uint32_t(s.size());
        body_.append(reinterpret_cast<const char*>(&len), 4);
        body_ += s;
      }
      std::string page;
      m.raw += append_page(page, kDictionaryPage, body_, c.dict.size(), kPlain);
      m.dict_offset = offset_;
      write(page);
      m.packed += int64_t(page.size());
      m.data_offset = offset_;
    }
    write(c.pages);
    m.raw += int64_t(c.pages_raw);
    m.packed += int64_t(c.pages.size());
    c.pages.clear();
    c.pages.shrink_to_fit();
    c.pages_raw = 0;
    metas.push_back(m);
  }
  groups_.push_back(std::move(metas));
  group_sizes_.push_back(group_rows_);
  group_rows_ = 0;
}

std::string ParquetWriter::footer() const {
  Compact f;
  f.i32(1, 1);  // version
  f.list(2, Compact::kStruct, cols_.size() + 1);
  f.begin_element();  // the root: a group of the columns
  f.binary(4, "schema");
  f.i32(5, int64_t(cols_.size()));
  f.end_struct();
  for (const Column& c : cols_) {
    f.begin_element();
    f.i32(1, physical(c.spec.kind));
    f.i32(3, c.spec.all_null ? 1 : 0);  // OPTIONAL : REQUIRED
    f.binary(4, c.spec.name);
    if (converted(c.spec.kind) != kNone) f.i32(6, converted(c.spec.kind));
    f.end_struct();
  }
  f.i64(3, int64_t(rows_));
  f.list(4, Compact::kStruct, groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    f.begin_element();
    f.list(1, Compact::kStruct, cols_.size());
    int64_t raw = 0;
    for (size_t i = 0; i < cols_.size(); ++i) {
      const ChunkMeta& m = groups_[g][i];
      const ColumnSpec& s = cols_[i].spec;
      raw += m.raw;
      f.begin_element();
      f.i64(2, m.offset);
      f.begin_struct(3);
      f.i32(1, physical(s.kind));
      std::vector<int> enc = encodings(s);
      f.list(2, Compact::kI32, enc.size());
      for (int e : enc) f.element(e);
      f.list(3, Compact::kBinary, 1);
      f.element(s.name);
      f.i32(4, kZstdCodec);
      f.i64(5, int64_t(group_sizes_[g]));
      f.i64(6, m.raw);
      f.i64(7, m.packed);
      f.i64(9, m.data_offset);
      if (m.dict_offset >= 0) f.i64(11, m.dict_offset);
      f.end_struct();
      f.end_struct();
    }
    f.i64(2, raw);
    f.i64(3, int64_t(group_sizes_[g]));
    f.end_struct();
  }
  f.binary(6, "cptrace");
  f.out += '\0';
  return f.out;
}

void ParquetWriter::close() {
  if (closed_) return;
  closed_ = true;
  if (page_rows_) end_page();
  end_group();
  wait_idle();
  std::string meta = footer();
  uint32_t len = uint32_t(meta.size());
  meta.append(reinterpret_cast<const char*>(&len), 4);
  meta += "PAR1";
  write(meta);
  out_.close();
}

}  // namespace cptrace
