// Streaming Parquet writer for the export tables (parquet_writer.h). The
// format: apache/parquet-format (parquet.thrift, Encodings.md).
#include "tables/parquet_writer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <tuple>
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

// 32 values of W bits each (each below 2^W) into 4 * W bytes, least
// significant bit first: one loop per width, unrolled, so that the shifts are
// constants and whole 8-byte words are stored.
template <int W>
void pack32(const uint64_t* v, char* out) {
  if constexpr (W == 64) {
    std::memcpy(out, v, 256);
  } else if constexpr (W > 0) {
    uint64_t acc = 0;
    int bits = 0;
#pragma GCC unroll 32
    for (int i = 0; i < 32; ++i) {
      acc |= v[i] << bits;
      if (bits + W >= 64) {
        std::memcpy(out, &acc, 8);
        out += 8;
        acc = bits + W > 64 ? v[i] >> (64 - bits) : 0;
        bits = bits + W - 64;
      } else {
        bits += W;
      }
    }
    if (bits) std::memcpy(out, &acc, size_t(bits / 8));  // 32 * W bits: whole 32-bit words
  }
}

using Pack32 = void (*)(const uint64_t*, char*);
template <size_t... W>
constexpr std::array<Pack32, sizeof...(W)> pack32_table(std::index_sequence<W...>) {
  return {&pack32<int(W)>...};
}
constexpr std::array<Pack32, 65> kPack32 = pack32_table(std::make_index_sequence<65>{});

// Appends 32 values of `width` bits (4 * width bytes).
void bit_pack32(const uint64_t* v, int width, std::string& out) {
  const size_t at = out.size();
  out.resize(at + 4 * size_t(width));
  kPack32[size_t(width)](v, out.data() + at);
}

int bit_width(uint64_t max) { return max ? 64 - __builtin_clzll(max) : 0; }

// DELTA_BINARY_PACKED: blocks of 128 deltas in 4 miniblocks of 32, each
// miniblock bit-packed at its own width after subtracting the block's least
// delta. Deltas wrap around (two's complement) at the physical type's width,
// as the format says; `narrow` is INT32, whose values are the low 32 bits.
// Also the least and greatest value (n > 0) as T orders them (uint64_t for the
// UInt kinds): read once, in the same pass.
template <bool narrow, class T>
std::pair<int64_t, int64_t> delta_binary_packed(const int64_t* v, size_t n, std::string& out) {
  constexpr size_t kBlock = 128, kMini = 32;
  auto value = [&](size_t i) { return narrow ? int64_t(int32_t(uint32_t(v[i]))) : v[i]; };
  varint(out, kBlock);
  varint(out, kBlock / kMini);
  varint(out, n);
  varint(out, zigzag(n ? value(0) : 0));
  T lo = n ? T(v[0]) : T(0), hi = lo;
  uint64_t d[kBlock];
  for (size_t at = 1; at < n; at += kBlock) {
    const size_t m = std::min(kBlock, n - at);
    int64_t least = INT64_MAX;
    for (size_t j = 0; j < m; ++j) {
      lo = std::min(lo, T(v[at + j]));
      hi = std::max(hi, T(v[at + j]));
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
    for (size_t k = 0; k * kMini < m; ++k) bit_pack32(d + k * kMini, widths[k], out);
  }
  return {int64_t(lo), int64_t(hi)};
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
  // Groups of 8 values, packed 32 at a time (a whole number of 32-bit words);
  // the last group is padded with zeros, which the value count leaves unread.
  for (size_t at = 0; at < groups * 8; at += 32) {
    size_t m = std::min<size_t>(32, groups * 8 - at);
    for (size_t j = 0; j < 32; ++j) g[j] = at + j < n ? uint64_t(v[at + j]) : 0;
    const size_t start = out.size();
    bit_pack32(g, width, out);
    out.resize(start + m * size_t(width) / 8);
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

ParquetWriter::Shape ParquetWriter::shape_for(uint64_t memory, size_t columns, size_t pages) {
  Shape s;
  // half for the page values
  const uint64_t page = memory / 2 / (std::max<size_t>(pages, 1) * 8 * std::max<size_t>(columns, 1));
  s.page_rows = size_t(std::clamp<uint64_t>(page, 1024, kPageRows));
  const uint64_t group = memory / 2 / kPackedRowBytes / s.page_rows;  // the other half for a row group
  s.group_rows = s.page_rows * size_t(std::clamp<uint64_t>(group, 1, kRowGroupRows / s.page_rows));
  return s;
}

ParquetWriter::Encoder::Encoder() {
  zctx_ = ZSTD_createCCtx();
  if (!zctx_) throw std::runtime_error("zstd: cannot create a compression context");
}

ParquetWriter::Encoder::~Encoder() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zctx_)); }

uint64_t ParquetWriter::Encoder::append_page(std::string& to, int page_type, std::string_view body, size_t n,
                                             int encoding) {
  zbuf_.resize(ZSTD_compressBound(body.size()));
  size_t packed = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zctx_), zbuf_.data(), zbuf_.size(), body.data(),
                                    body.size(), kZstdLevel);
  if (ZSTD_isError(packed)) throw std::runtime_error(fmt::format("zstd: {}", ZSTD_getErrorName(packed)));
  if (body.size() > INT32_MAX || packed > INT32_MAX) throw std::runtime_error("a Parquet page over 2 GiB");
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

namespace {

bool unsigned_order(ParquetWriter::Kind k) {
  return k == ParquetWriter::Kind::UInt16 || k == ParquetWriter::Kind::UInt32 || k == ParquetWriter::Kind::UInt64;
}

// The least and greatest of v[0..n), n > 0: signed, or as unsigned (the bit
// patterns of UInt64 values). Four at a time, so that four compare chains run
// side by side.
template <class T>
std::pair<int64_t, int64_t> extremes_as(const int64_t* v, size_t n) {
  T lo[4], hi[4];
  std::fill(lo, lo + 4, T(v[0]));
  std::fill(hi, hi + 4, T(v[0]));
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (size_t k = 0; k < 4; ++k) {
      lo[k] = std::min(lo[k], T(v[i + k]));
      hi[k] = std::max(hi[k], T(v[i + k]));
    }
  for (; i < n; ++i) {
    lo[0] = std::min(lo[0], T(v[i]));
    hi[0] = std::max(hi[0], T(v[i]));
  }
  return {int64_t(*std::min_element(lo, lo + 4)), int64_t(*std::max_element(hi, hi + 4))};
}

std::pair<int64_t, int64_t> extremes(const int64_t* v, size_t n, bool as_unsigned) {
  return as_unsigned ? extremes_as<uint64_t>(v, n) : extremes_as<int64_t>(v, n);
}

}  // namespace

void ParquetWriter::Encoder::encode(const std::vector<ColumnSpec>& columns, const Page& in, EncodedPage& out) {
  const size_t n = in.rows;
  out.rows = n;
  out.columns.resize(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    const ColumnSpec& spec = columns[i];
    EncodedPage::Column& col = out.columns[i];
    col.bytes.clear();
    body_.clear();
    int encoding = kPlain;
    const int64_t* v = in.values[i].data();
    if (spec.all_null) {
      // Definition levels only (all 0: NULL), RLE with their 4-byte length as a
      // data page of version 1 has them; no values.
      std::string levels;
      varint(levels, uint64_t(n) << 1);
      levels += '\0';
      uint32_t len = uint32_t(levels.size());
      body_.append(reinterpret_cast<const char*>(&len), 4);
      body_ += levels;
    } else {
      if (in.values[i].size() < n) throw std::logic_error("Parquet page: a column with fewer values than rows");
      if (spec.kind == Kind::Bool) {
        body_.assign((n + 7) / 8, '\0');
        for (size_t r = 0; r < n; ++r)
          if (v[r]) body_[r / 8] = char(body_[r / 8] | 1 << (r % 8));
        if (n) std::tie(col.lo, col.hi) = extremes(v, n, false);
      } else if (spec.kind == Kind::String) {
        // Codes are below the dictionary's size: the page's greatest one sets the width.
        encoding = kRleDictionary;
        if (n) std::tie(col.lo, col.hi) = extremes(v, n, true);
        int width = std::max(bit_width(uint64_t(col.hi)), 1);
        body_ += char(width);
        hybrid(v, n, width, body_);
      } else {
        encoding = kDeltaBinaryPacked;
        const bool as_unsigned = unsigned_order(spec.kind);
        if (physical(spec.kind) == kInt32)
          std::tie(col.lo, col.hi) = delta_binary_packed<true, uint64_t>(v, n, body_);  // UInt16, UInt32
        else if (as_unsigned)
          std::tie(col.lo, col.hi) = delta_binary_packed<false, uint64_t>(v, n, body_);
        else
          std::tie(col.lo, col.hi) = delta_binary_packed<false, int64_t>(v, n, body_);
      }
    }
    col.raw = append_page(col.bytes, kDataPage, body_, n, encoding);
  }
}

ParquetWriter::ParquetWriter(OutFile& out, std::vector<ColumnSpec> columns, bool background, Shape shape,
                             bool pages_only)
    : out_(out), specs_(std::move(columns)), shape_(shape) {
  shape_.page_rows = std::max<size_t>(shape_.page_rows, 1);
  shape_.group_rows = std::max(shape_.group_rows / shape_.page_rows, size_t(1)) * shape_.page_rows;
  cols_.resize(specs_.size());
  job_.values.resize(specs_.size());
  for (size_t i = 0; i < specs_.size() && !pages_only; ++i)
    if (!specs_[i].all_null) cols_[i].values.resize(shape_.page_rows);
  write("PAR1");
  if (background && !pages_only)
    worker_ = std::make_unique<BackgroundJob>([this] { encoder_.encode(specs_, job_, done_); });
}

ParquetWriter::~ParquetWriter() = default;

void ParquetWriter::wait_idle() {
  if (worker_) worker_->wait();
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

// put_*'s page goes to the encoder (the worker's, if any) once the one before
// it is done and appended.
void ParquetWriter::end_page() {
  wait_idle();
  if (pending_) {
    pending_ = false;
    append(done_);
  }
  if (page_rows_ == 0) return;
  for (size_t i = 0; i < cols_.size(); ++i) {
    std::swap(cols_[i].values, job_.values[i]);
    if (!specs_[i].all_null) cols_[i].values.resize(shape_.page_rows);
  }
  job_.rows = page_rows_;
  rows_ += page_rows_;
  page_rows_ = 0;
  pending_ = true;
  if (worker_) {
    worker_->start();
  } else {
    encoder_.encode(specs_, job_, done_);
  }
}

void ParquetWriter::append(EncodedPage& p) {
  if (p.columns.size() != cols_.size()) throw std::logic_error("Parquet page of another schema");
  if (&p != &done_) rows_ += p.rows;
  for (size_t i = 0; i < cols_.size(); ++i) {
    Column& c = cols_[i];
    const EncodedPage::Column& pc = p.columns[i];
    c.pages += pc.bytes;
    c.pages_raw += pc.raw;
    if (specs_[i].all_null || p.rows == 0) continue;
    if (!c.any) {
      c.any = true;
      c.lo = pc.lo, c.hi = pc.hi;
    } else if (unsigned_order(specs_[i].kind)) {
      c.lo = int64_t(std::min(uint64_t(c.lo), uint64_t(pc.lo)));
      c.hi = int64_t(std::max(uint64_t(c.hi), uint64_t(pc.hi)));
    } else {
      c.lo = std::min(c.lo, pc.lo);
      c.hi = std::max(c.hi, pc.hi);
    }
  }
  group_rows_ += p.rows;
  if (group_rows_ >= shape_.group_rows) end_group();
}

// The row group's column chunks, one after the other: a String column's
// dictionary page (every string coded so far), then its data pages.
void ParquetWriter::end_group() {
  if (group_rows_ == 0) return;
  std::vector<ChunkMeta> metas;
  for (size_t i = 0; i < cols_.size(); ++i) {
    Column& c = cols_[i];
    const ColumnSpec& spec = specs_[i];
    ChunkMeta m{offset_, offset_, -1, 0, 0, false, 0, 0};
    if (spec.kind == Kind::String && !spec.all_null) {
      std::string& body = encoder_.body_;
      body.clear();
      for (const std::string& s : c.dict) {
        uint32_t len = uint32_t(s.size());
        body.append(reinterpret_cast<const char*>(&len), 4);
        body += s;
      }
      std::string page;
      m.raw += encoder_.append_page(page, kDictionaryPage, body, c.dict.size(), kPlain);
      m.dict_offset = offset_;
      write(page);
      m.packed += int64_t(page.size());
      m.data_offset = offset_;
    } else if (!spec.all_null && c.any) {
      m.stats = true, m.lo = c.lo, m.hi = c.hi;
    }
    write(c.pages);
    m.raw += int64_t(c.pages_raw);
    m.packed += int64_t(c.pages.size());
    c.pages.clear();  // its capacity kept: the next group's pages take as much
    c.pages_raw = 0;
    c.any = false;
    metas.push_back(m);
  }
  groups_.push_back(std::move(metas));
  group_sizes_.push_back(group_rows_);
  group_rows_ = 0;
}

namespace {

// A statistics value: the physical type's PLAIN bytes (little-endian; one
// byte for a boolean).
std::string plain_value(PhysicalType t, int64_t v) {
  const size_t n = t == kBoolean ? 1 : t == kInt32 ? 4 : 8;
  std::string s(n, '\0');
  std::memcpy(s.data(), &v, n);  // little-endian: the low bytes first
  return s;
}

}  // namespace

std::string ParquetWriter::footer() const {
  Compact f;
  f.i32(1, 1);  // version
  f.list(2, Compact::kStruct, specs_.size() + 1);
  f.begin_element();  // the root: a group of the columns
  f.binary(4, "schema");
  f.i32(5, int64_t(specs_.size()));
  f.end_struct();
  for (const ColumnSpec& s : specs_) {
    f.begin_element();
    f.i32(1, physical(s.kind));
    f.i32(3, s.all_null ? 1 : 0);  // OPTIONAL : REQUIRED
    f.binary(4, s.name);
    if (converted(s.kind) != kNone) f.i32(6, converted(s.kind));
    f.end_struct();
  }
  f.i64(3, int64_t(rows_));
  f.list(4, Compact::kStruct, groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    f.begin_element();
    f.list(1, Compact::kStruct, specs_.size());
    int64_t raw = 0;
    for (size_t i = 0; i < specs_.size(); ++i) {
      const ChunkMeta& m = groups_[g][i];
      const ColumnSpec& s = specs_[i];
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
      if (s.all_null || m.stats) {
        f.begin_struct(12);  // Statistics
        f.i64(3, s.all_null ? int64_t(group_sizes_[g]) : 0);  // null_count
        if (m.stats) {
          f.binary(5, plain_value(physical(s.kind), m.hi));  // max_value
          f.binary(6, plain_value(physical(s.kind), m.lo));  // min_value
        }
        f.end_struct();
      }
      f.end_struct();
      f.end_struct();
    }
    f.i64(2, raw);
    f.i64(3, int64_t(group_sizes_[g]));
    f.end_struct();
  }
  f.binary(6, "cptrace");
  // column_orders: every column's values ordered as its (logical) type says,
  // which gives min_value and max_value their meaning.
  f.list(7, Compact::kStruct, specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    f.begin_element();
    f.begin_struct(1);  // TYPE_ORDER: an empty TypeDefinedOrder
    f.end_struct();
    f.end_struct();
  }
  f.out += '\0';
  return f.out;
}

void ParquetWriter::close() {
  if (closed_) return;
  closed_ = true;
  end_page();  // the last put_* rows, and the page before them
  end_page();  // appends that last page
  end_group();
  std::string meta = footer();
  uint32_t len = uint32_t(meta.size());
  meta.append(reinterpret_cast<const char*>(&len), 4);
  meta += "PAR1";
  write(meta);
  out_.close();
}

}  // namespace cptrace
