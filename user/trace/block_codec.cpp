// Frame payload encoding (layout in block_codec.h).
//
// Speed matters on the writer side (the collector compresses every recorded
// event): columns are written in one tight pass each into a thread-local scratch
// buffer sized for the worst case, so the inner loops carry no bounds checks, and
// zstd contexts are reused per thread. The decoder, which sees hostile input,
// checks every byte it reads instead.
#include "trace/block_codec.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include <zstd.h>

#include <fmt/format.h>

namespace cptrace {
namespace {

// ---- varints and zigzag ------------------------------------------------------------

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// put_varint without a branch on the value's length, for v < 2^56: all its
// bytes in one 8-byte store (the bytes past the varint are scratch, written
// over by what follows; the buffer is sized for 10 bytes per varint). The ts
// column's deltas straddle one and two bytes at random, so the length branch
// of the loop above mispredicted on about half of the recorded events.
inline uint8_t* put_varint_short(uint8_t* p, uint64_t v) {
  if (v < (uint64_t{1} << 14)) {  // most deltas of a busy recording: a predictable branch
    const unsigned two = v >= 0x80;
    uint16_t w = static_cast<uint16_t>((v & 0x7f) | ((v << 1) & 0x7f00) | (two << 7));
    w = htole16(w);
    std::memcpy(p, &w, 2);
    return p + 1 + two;
  }
  const unsigned len = (63 - unsigned(__builtin_clzll(v | 1))) / 7 + 1;  // 1..8
  uint64_t w = (v & 0x7f) | ((v << 1) & 0x7f00) | ((v << 2) & 0x7f0000) | ((v << 3) & 0x7f000000) |
               ((v << 4) & 0x7f00000000) | ((v << 5) & 0x7f0000000000) | ((v << 6) & 0x7f000000000000) |
               ((v << 7) & 0x7f00000000000000);
  w |= 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);  // all but the last byte continue
  w = htole64(w);
  std::memcpy(p, &w, 8);
  return p + len;
}

// Zigzag of the wrapping difference b - a in U's width: small steps either way
// become small unsigned numbers, and decoding wraps back exactly.
template <class U>
inline U zigzag_delta(U a, U b) {
  static_assert(std::is_unsigned_v<U>);
  using S = std::make_signed_t<U>;
  U d = static_cast<U>(b - a);
  return static_cast<U>(static_cast<U>(d << 1) ^ static_cast<U>(static_cast<S>(d) >> (sizeof(U) * 8 - 1)));
}

template <class U>
inline U unzigzag(U z) {
  return static_cast<U>((z >> 1) ^ static_cast<U>(-static_cast<U>(z & 1)));
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }
[[noreturn, gnu::noinline]] void out_of_range(const char* what) { fail(std::string(what) + " out of range"); }

// The low 7 bits of each byte of w, packed into 56 bits (byte 0 lowest).
inline uint64_t pack7(uint64_t w) {
  w = (w & 0x007f007f007f007full) | ((w & 0x7f007f007f007f00ull) >> 1);
  w = (w & 0x00003fff00003fffull) | ((w & 0x3fff00003fff0000ull) >> 2);
  return (w & 0x000000000fffffffull) | ((w & 0x0fffffff00000000ull) >> 4);
}

// A varint's value and the byte after it.
struct Varint {
  uint64_t v;
  const uint8_t* next;
};

// A bounds-checked reader over the decoded payload.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}

  // Inlined where it runs (every column value of every frame read): most deltas
  // fit one byte and take no call. The longer ones call a function that takes
  // and returns the position by value: a call given the cursor itself would
  // keep its position in memory, loaded and stored around every value.
  [[gnu::always_inline]] uint64_t varint() {
    if (p_ != end_ && *p_ < 0x80) [[likely]]
      return *p_++;
    Varint r = varint_long(p_, end_);
    p_ = r.next;
    return r.v;
  }

  [[gnu::noinline]] static Varint varint_long(const uint8_t* p, const uint8_t* end) {
    // Timestamp deltas take a few bytes: with a whole varint's worth left, no
    // bounds check per byte (this runs for every event of every frame read).
    if (end - p >= 10) [[likely]] {
      // The first 8 bytes at once: the first byte without its high bit ends the
      // varint, and the 7-bit groups before it are packed by shifts (no loop
      // whose exit depends on the data: hashed tuple ids take 10 bytes).
      uint64_t w;
      std::memcpy(&w, p, 8);
      w = le64toh(w);
      const uint64_t stops = ~w & 0x8080808080808080ull;
      const unsigned len = stops ? (static_cast<unsigned>(__builtin_ctzll(stops)) >> 3) + 1 : 8;
      if (len < 8) w &= (uint64_t{1} << (8 * len)) - 1;
      uint64_t v = pack7(w);
      if (stops) return {v, p + len};
      uint8_t b = p[8];
      v |= static_cast<uint64_t>(b & 0x7f) << 56;
      if (!(b & 0x80)) return {v, p + 9};
      b = p[9];  // the 10th byte holds bit 63 only
      if (b > 1) [[unlikely]]
        fail(b & 0x80 ? "varint longer than 10 bytes" : "varint overflows 64 bits");
      return {v | static_cast<uint64_t>(b) << 63, p + 10};
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (p == end) [[unlikely]]
        fail("varint runs past the end of the frame");
      uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        if (shift == 63 && b > 1) [[unlikely]]
          fail("varint overflows 64 bits");
        return {v, p};
      }
    }
    fail("varint longer than 10 bytes");
  }

  [[gnu::always_inline]] uint64_t varint_max(uint64_t max, const char* what) {
    uint64_t v = varint();
    if (v > max) [[unlikely]]
      out_of_range(what);
    return v;
  }

  const uint8_t* take(size_t n, const char* what) {
    if (remaining() < n) fail(std::string(what) + " runs past the end of the frame");
    const uint8_t* p = p_;
    p_ += n;
    return p;
  }

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// ---- zstd contexts, one per thread, reused ------------------------------------------

ZSTD_CCtx* cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> c(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!c) throw std::bad_alloc();
  return c.get();
}

ZSTD_DCtx* dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> d(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!d) throw std::bad_alloc();
  return d.get();
}

}  // namespace

// Fills out.payload and out.hdr from `raw`: zstd-compressed when that is smaller
// (and level != 0), stored as is otherwise.
void finish_frame(EncodedFrame& out, FrameType type, const uint8_t* raw, size_t raw_len, uint32_t count, int level) {
  if (raw_len > kMaxRawBytes) throw std::invalid_argument("frame payload beyond kMaxRawBytes");
  out.hdr = FrameHeader{};
  out.hdr.type = static_cast<uint16_t>(type);
  out.hdr.raw_len = static_cast<uint32_t>(raw_len);
  out.hdr.count = count;
  out.payload.clear();
  if (level != 0 && raw_len > 0) {
    // Compressed into a per-thread buffer that only grows, then copied: resizing
    // the payload to the bound would zero-fill it, for every frame.
    thread_local std::unique_ptr<uint8_t[]> buf;
    thread_local size_t buf_size = 0;
    size_t bound = ZSTD_compressBound(raw_len);
    if (buf_size < bound) {
      buf.reset(new uint8_t[bound]);
      buf_size = bound;
    }
    size_t c = ZSTD_compressCCtx(cctx(), buf.get(), bound, raw, raw_len, level);
    if (ZSTD_isError(c)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(c));
    if (c < raw_len) {
      out.payload.assign(buf.get(), buf.get() + c);
      out.hdr.flags = kFrameZstd;
      seal_frame(out.hdr, out.payload.data(), out.payload.size());
      return;
    }
  }
  out.payload.assign(raw, raw + raw_len);
  seal_frame(out.hdr, out.payload.data(), out.payload.size());
}

// Checks the header against the payload and returns the decoded (decompressed)
// bytes: the payload itself, or a thread-local scratch buffer.
std::pair<const uint8_t*, size_t> frame_bytes(const FrameHeader& h, FrameType want, const uint8_t* payload,
                                              size_t len) {
  if (h.type != static_cast<uint16_t>(want)) fail("unexpected frame type " + std::to_string(h.type));
  if (const char* problem = frame_header_problem(h)) fail(problem);
  if (len != h.payload_len) fail("payload length does not match the frame header");
  if (!(h.flags & kFrameZstd)) return {payload, len};

  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < h.raw_len) scratch.resize(h.raw_len);
  size_t n = ZSTD_decompressDCtx(dctx(), scratch.data(), h.raw_len, payload, len);
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != h.raw_len) fail("decompressed size does not match raw_len");
  return {scratch.data(), n};
}

namespace {

// ---- events: encoder ----------------------------------------------------------------

// Bytes per event at most: ts 10, channel index 3 (< 2^21), tuple 10, pid 5,
// tid 5, cpu 3, kind 1, timebase 1; plus 8 per channel table entry.
constexpr size_t kWorstEventBytes = 38 + 8;

// Maps channel ids to table indices. Frames usually see a handful of channels, so
// the last hit and a short linear scan beat hashing; a map takes over beyond that.
class ChannelTable {
 public:
  void clear() {
    ids_.clear();
    map_.clear();
    last_ = 0;
  }
  uint32_t index_of(uint64_t id) {
    if (last_ < ids_.size() && ids_[last_] == id) return last_;
    if (ids_.size() <= kLinear) {
      for (uint32_t i = 0; i < ids_.size(); ++i)
        if (ids_[i] == id) return last_ = i;
    } else if (auto it = map_.find(id); it != map_.end()) {
      return last_ = it->second;
    }
    return last_ = add(id);
  }
  const std::vector<uint64_t>& ids() const { return ids_; }

 private:
  static constexpr size_t kLinear = 16;
  uint32_t add(uint64_t id) {
    auto i = static_cast<uint32_t>(ids_.size());
    ids_.push_back(id);
    if (ids_.size() == kLinear + 1)
      for (uint32_t j = 0; j < ids_.size(); ++j) map_.emplace(ids_[j], j);
    else if (ids_.size() > kLinear + 1)
      map_.emplace(id, i);
    return i;
  }
  std::vector<uint64_t> ids_;
  std::unordered_map<uint64_t, uint32_t> map_;
  uint32_t last_ = 0;
};

// One column of events stored as rows or as columns, for the one encoder:
// a value by index, and where the run of a value ends (put_delta_column).
template <class U, U TraceEvent::*Field>
struct RowColumn {
  const TraceEvent* ev;
  U operator[](size_t i) const { return ev[i].*Field; }
  size_t run_end(size_t i, size_t n, U v) const {
    while (i < n && ev[i].*Field == v) ++i;
    return i;
  }
};

// Runs (constant pid, tid and cpu over a recorded batch, often over a whole
// frame) are found eight values per branch: the recorder encodes every event,
// and one compare-and-branch per value was most of the encoder's time.
template <class U>
struct ArrayColumn {
  const U* a;
  U operator[](size_t i) const { return a[i]; }
  size_t run_end(size_t i, size_t n, U v) const {
    for (; i + 8 <= n; i += 8) {
      U x = 0;
      for (size_t k = 0; k < 8; ++k) x |= static_cast<U>(a[i + k] ^ v);
      if (x) break;
    }
    while (i < n && a[i] == v) ++i;
    return i;
  }
};

struct RowView {
  const TraceEvent* ev;
  RowColumn<uint64_t, &TraceEvent::ts> ts() const { return {ev}; }
  RowColumn<uint64_t, &TraceEvent::channel> channel() const { return {ev}; }
  RowColumn<uint64_t, &TraceEvent::tuple> tuple() const { return {ev}; }
  RowColumn<uint32_t, &TraceEvent::pid> pid() const { return {ev}; }
  RowColumn<uint32_t, &TraceEvent::tid> tid() const { return {ev}; }
  RowColumn<uint16_t, &TraceEvent::cpu> cpu() const { return {ev}; }
  uint8_t* put_kind(uint8_t* p, size_t n) const {
    for (size_t i = 0; i < n; ++i) *p++ = ev[i].kind;
    return p;
  }
  uint8_t* put_timebase(uint8_t* p, size_t n) const {
    for (size_t i = 0; i < n; ++i) *p++ = ev[i].timebase;
    return p;
  }
};

struct ColumnView {
  const EventColumns& c;
  ArrayColumn<uint64_t> ts() const { return {c.ts.data()}; }
  ArrayColumn<uint64_t> channel() const { return {c.channel.data()}; }
  ArrayColumn<uint64_t> tuple() const { return {c.tuple.data()}; }
  ArrayColumn<uint32_t> pid() const { return {c.pid.data()}; }
  ArrayColumn<uint32_t> tid() const { return {c.tid.data()}; }
  ArrayColumn<uint16_t> cpu() const { return {c.cpu.data()}; }
  uint8_t* put_kind(uint8_t* p, size_t n) const {
    if (n) std::memcpy(p, c.kind.data(), n);
    return p + n;
  }
  uint8_t* put_timebase(uint8_t* p, size_t n) const {
    if (n) std::memcpy(p, c.timebase.data(), n);
    return p + n;
  }
};

// A repeated value's delta is the one byte 0, so runs (pid, tid and cpu are
// constant over each recorded batch) are written as zeros at memset speed
// instead of one varint at a time: the recorder encodes every event.
// Branchless: lengths vary from value to value (see put_varint_short).
template <class U, bool Branchless = false, class Col>
uint8_t* put_delta_column(uint8_t* p, size_t n, const Col& col) {
  U prev = 0;
  for (size_t i = 0; i < n;) {
    U v = col[i];
    if (v == prev) {
      size_t j = col.run_end(i + 1, n, prev);
      std::memset(p, 0, j - i);
      p += j - i;
      i = j;
      continue;
    }
    U z = zigzag_delta<U>(prev, v);
    if (Branchless && uint64_t(z) < (uint64_t{1} << 56))
      p = put_varint_short(p, z);
    else
      p = put_varint(p, z);
    prev = v;
    ++i;
  }
  return p;
}

// Channel table followed by every column; returns the end of the written bytes.
template <class View>
uint8_t* put_event_columns(uint8_t* p, const View& v, size_t n) {
  thread_local ChannelTable table;
  thread_local std::vector<uint8_t> idx;  // the index column while every index fits one byte
  table.clear();
  if (idx.size() < n) idx.resize(n);
  // One lookup per run of a channel (a recorded batch is one channel's); a
  // value repeated is taken as the start of a run.
  const auto channel = v.channel();
  for (size_t i = 0; i < n;) {
    uint64_t c = channel[i];
    uint32_t k = table.index_of(c);
    size_t j = i + 1 < n && channel[i + 1] == c ? channel.run_end(i + 2, n, c) : i + 1;
    std::memset(idx.data() + i, static_cast<uint8_t>(k), j - i);
    i = j;
  }

  p = put_varint(p, table.ids().size());
  if (!table.ids().empty()) std::memcpy(p, table.ids().data(), table.ids().size() * sizeof(uint64_t));
  p += table.ids().size() * sizeof(uint64_t);

  p = put_delta_column<uint64_t, true>(p, n, v.ts());
  if (table.ids().size() <= 0x80) {  // every index is one varint byte
    if (n) std::memcpy(p, idx.data(), n);
    p += n;
  } else {  // the table is complete: looking an id up again gives its index
    for (size_t i = 0; i < n; ++i) p = put_varint(p, table.index_of(channel[i]));
  }
  p = put_delta_column<uint64_t, true>(p, n, v.tuple());
  p = put_delta_column<uint32_t>(p, n, v.pid());
  p = put_delta_column<uint32_t>(p, n, v.tid());
  p = put_delta_column<uint16_t>(p, n, v.cpu());
  p = v.put_kind(p, n);
  return v.put_timebase(p, n);
}

template <class View>
void encode_view_into(const View& v, size_t n, int zstd_level, EncodedFrame& out) {
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_events: more than kMaxFrameEvents events");
  thread_local std::vector<uint8_t> raw;
  size_t worst = 16 + n * kWorstEventBytes;
  if (raw.size() < worst) raw.resize(worst);
  uint8_t* end = put_event_columns(raw.data(), v, n);
  finish_frame(out, FrameType::Events, raw.data(), static_cast<size_t>(end - raw.data()), static_cast<uint32_t>(n),
               zstd_level);
}

// ---- events: decoder ----------------------------------------------------------------

template <class U, class Set>
void get_delta_column(Cursor& c, std::vector<TraceEvent>& out, const char* what, Set set) {
  U prev = 0;
  for (auto& e : out) {
    prev = static_cast<U>(prev + unzigzag<U>(static_cast<U>(c.varint_max(std::numeric_limits<U>::max(), what))));
    set(e, prev);
  }
}

std::vector<uint64_t> get_channel_table(Cursor& c, uint32_t count) {
  uint64_t nchan = c.varint_max(count, "channel table size");
  const uint8_t* p = c.take(nchan * sizeof(uint64_t), "channel table");
  std::vector<uint64_t> ids(nchan);
  if (nchan > 0) std::memcpy(ids.data(), p, nchan * sizeof(uint64_t));
  return ids;
}

void get_event_columns(Cursor& c, std::vector<TraceEvent>& out) {
  std::vector<uint64_t> chan = get_channel_table(c, static_cast<uint32_t>(out.size()));
  get_delta_column<uint64_t>(c, out, "ts", [](TraceEvent& e, uint64_t v) { e.ts = v; });
  for (auto& e : out) {
    if (chan.empty()) fail("channel index without a channel table");
    e.channel = chan[c.varint_max(chan.size() - 1, "channel index")];
  }
  get_delta_column<uint64_t>(c, out, "tuple", [](TraceEvent& e, uint64_t v) { e.tuple = v; });
  get_delta_column<uint32_t>(c, out, "pid", [](TraceEvent& e, uint32_t v) { e.pid = v; });
  get_delta_column<uint32_t>(c, out, "tid", [](TraceEvent& e, uint32_t v) { e.tid = v; });
  get_delta_column<uint16_t>(c, out, "cpu", [](TraceEvent& e, uint16_t v) { e.cpu = v; });
  const uint8_t* kind = c.take(out.size(), "kind column");
  const uint8_t* tb = c.take(out.size(), "timebase column");
  for (size_t i = 0; i < out.size(); ++i) {
    // Unknown kinds are passed on (readers skip what they do not know); an unknown
    // timebase is not, because nobody could convert the timestamp.
    if (tb[i] > kLastTimebase) fail("unknown timebase");
    out[i].kind = kind[i];
    out[i].timebase = tb[i];
    out[i].ts_err = 0;  // not stored; the vector is reused, so a stale reader-set value would stay
  }
  if (c.remaining() != 0) fail("trailing bytes after the last column");
}

}  // namespace

// ---- public API -----------------------------------------------------------------------

void encode_events_into(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out) {
  encode_view_into(RowView{ev}, n, zstd_level, out);
}

void encode_columns_into(const EventColumns& ev, int zstd_level, EncodedFrame& out) {
  encode_view_into(ColumnView{ev}, ev.size(), zstd_level, out);
}

// ---- EventColumns -------------------------------------------------------------------

void EventColumns::reserve(size_t cap) {
  if (cap <= capacity()) return;
  ts.resize(cap);
  channel.resize(cap);
  tuple.resize(cap);
  pid.resize(cap);
  tid.resize(cap);
  cpu.resize(cap);
  kind.resize(cap);
  timebase.resize(cap);
}

size_t EventColumns::extend(size_t k) {
  if (n_ + k > capacity()) reserve(std::max({n_ + k, 2 * capacity(), size_t(64)}));
  size_t at = n_;
  n_ += k;
  return at;
}

void EventColumns::resize(size_t k) {
  size_t old = n_;
  if (k > old) extend(k - old);
  n_ = k;
  for (size_t i = old; i < k; ++i) set(i, TraceEvent{});
}

TraceEvent EventColumns::at(size_t i) const {
  TraceEvent e;
  e.ts = ts[i];
  e.channel = channel[i];
  e.tuple = tuple[i];
  e.pid = pid[i];
  e.tid = tid[i];
  e.cpu = cpu[i];
  e.kind = kind[i];
  e.timebase = timebase[i];
  return e;
}

void EventColumns::set(size_t i, const TraceEvent& e) {
  ts[i] = e.ts;
  channel[i] = e.channel;
  tuple[i] = e.tuple;
  pid[i] = e.pid;
  tid[i] = e.tid;
  cpu[i] = e.cpu;
  kind[i] = e.kind;
  timebase[i] = e.timebase;
}

EncodedFrame encode_events(const TraceEvent* ev, size_t n, int zstd_level) {
  EncodedFrame f;
  encode_events_into(ev, n, zstd_level, f);
  return f;
}

EncodedFrame encode_clock(const std::vector<ClockPoint>& pts) {
  if (pts.size() > kMaxRawBytes / sizeof(ClockPoint)) throw std::invalid_argument("encode_clock: too many points");
  EncodedFrame f;
  finish_frame(f, FrameType::Clock2, reinterpret_cast<const uint8_t*>(pts.data()), pts.size() * sizeof(ClockPoint),
               static_cast<uint32_t>(pts.size()), 1);
  return f;
}

EncodedFrame encode_json(FrameType type, const std::string& json, uint32_t count) {
  if (type != FrameType::Channels && type != FrameType::Counters && type != FrameType::Sync &&
      type != FrameType::Handlers && type != FrameType::Processes && type != FrameType::ClockAdjust)
    throw std::invalid_argument("encode_json: not a JSON frame type");
  EncodedFrame f;
  finish_frame(f, type, reinterpret_cast<const uint8_t*>(json.data()), json.size(), count, 1);
  return f;
}

void decode_events_into(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<TraceEvent>& out) {
  if (h.count > kMaxFrameEvents) fail("event count beyond kMaxFrameEvents");
  // Every event takes at least 8 bytes (one per column), the table size one more:
  // checked before decompressing or allocating anything.
  if (uint64_t{h.count} * 8 + 1 > h.raw_len) fail("raw_len too small for the event count");
  auto [raw, raw_len] = frame_bytes(h, FrameType::Events, payload, len);
  Cursor c(raw, raw_len);
  // Every field of every event is written by the columns: a vector reused from
  // the previous frame is resized, not cleared and zeroed again.
  out.resize(h.count);
  get_event_columns(c, out);
}

std::vector<TraceEvent> decode_events(const FrameHeader& h, const uint8_t* payload, size_t len) {
  std::vector<TraceEvent> out;
  decode_events_into(h, payload, len, out);
  return out;
}

// Both versions: Clock (24-byte points, written before MONOTONIC_RAW and the
// REALTIME offset were recorded) and Clock2 (56-byte points).
std::vector<ClockPoint> decode_clock(const FrameHeader& h, const uint8_t* payload, size_t len) {
  bool v2 = h.type == static_cast<uint16_t>(FrameType::Clock2);
  size_t rec = v2 ? kClockPointV2Bytes : kClockPointV1Bytes;
  if (uint64_t{h.count} * rec != h.raw_len)
    fail(fmt::format("clock frame (version {}): raw_len {} != count {} * {}", v2 ? 2 : 1, h.raw_len, h.count, rec));
  auto [raw, raw_len] = frame_bytes(h, v2 ? FrameType::Clock2 : FrameType::Clock, payload, len);
  std::vector<ClockPoint> pts(h.count);
  for (size_t i = 0; i < pts.size(); ++i) std::memcpy(&pts[i], raw + i * rec, rec);
  if (!v2)
    for (ClockPoint& p : pts) p.flags = 0;  // version 1's `reserved`: no version-2 field is set
  else
    for (const ClockPoint& p : pts)
      if (p.flags & ~(kClockHasRaw | kClockHasRealtime))
        fail(fmt::format("clock point with unknown flags 0x{:x}", p.flags));
  return pts;
}

std::string decode_json(const FrameHeader& h, const uint8_t* payload, size_t len) {
  auto type = static_cast<FrameType>(h.type);
  bool is_json = type == FrameType::Channels || type == FrameType::Counters || type == FrameType::Sync ||
                 type == FrameType::Handlers || type == FrameType::Processes || type == FrameType::ClockAdjust;
  auto [raw, raw_len] = frame_bytes(h, is_json ? type : FrameType::Channels, payload, len);
  return std::string(reinterpret_cast<const char*>(raw), raw_len);
}

}  // namespace cptrace
