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

#include "trace/channel_table.h"
#include "trace/events2_codec.h"
#include "trace/varint.h"

namespace cptrace {
namespace {

using namespace codec;

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

// ---- events, version 1: encoder -------------------------------------------------------

// Bytes per event at most: ts 10, channel index 3 (< 2^21), tuple 10, pid 5,
// tid 5, cpu 3, kind 1, timebase 1; plus 8 per channel table entry.
constexpr size_t kWorstEventBytes = 38 + 8;

// A repeated value's delta is the one byte 0, so runs (pid, tid and cpu are
// constant over each recorded batch) are written as zeros.
// Branchless: lengths vary from value to value (see put_varint_short).
template <class U, bool Branchless = false, class Get>
uint8_t* put_delta_column(uint8_t* p, size_t n, Get get) {
  U prev = 0;
  for (size_t i = 0; i < n; ++i) {
    U v = get(i);
    U z = zigzag_delta<U>(prev, v);
    if (Branchless && uint64_t(z) < (uint64_t{1} << 56))
      p = put_varint_short(p, z);
    else
      p = put_varint(p, z);
    prev = v;
  }
  return p;
}

// Channel table followed by every column; returns the end of the written bytes.
uint8_t* put_event_columns(uint8_t* p, const TraceEvent* ev, size_t n) {
  thread_local ChannelTable table;
  table.clear();
  for (size_t i = 0; i < n; ++i) table.index_of(ev[i].channel);
  p = put_varint(p, table.ids().size());
  if (!table.ids().empty()) std::memcpy(p, table.ids().data(), table.ids().size() * sizeof(uint64_t));
  p += table.ids().size() * sizeof(uint64_t);
  p = put_delta_column<uint64_t, true>(p, n, [&](size_t i) { return ev[i].ts; });
  for (size_t i = 0; i < n; ++i) p = put_varint(p, table.index_of(ev[i].channel));
  p = put_delta_column<uint64_t, true>(p, n, [&](size_t i) { return ev[i].tuple; });
  p = put_delta_column<uint32_t>(p, n, [&](size_t i) { return ev[i].pid; });
  p = put_delta_column<uint32_t>(p, n, [&](size_t i) { return ev[i].tid; });
  p = put_delta_column<uint16_t>(p, n, [&](size_t i) { return ev[i].cpu; });
  for (size_t i = 0; i < n; ++i) *p++ = ev[i].kind;
  for (size_t i = 0; i < n; ++i) *p++ = ev[i].timebase;
  return p;
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

void encode_events_version1(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out) {
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_events: more than kMaxFrameEvents events");
  thread_local std::vector<uint8_t> raw;
  size_t worst = 16 + n * kWorstEventBytes;
  if (raw.size() < worst) raw.resize(worst);
  uint8_t* end = put_event_columns(raw.data(), ev, n);
  finish_frame(out, FrameType::Events, raw.data(), static_cast<size_t>(end - raw.data()), static_cast<uint32_t>(n),
               zstd_level);
}

void encode_events_into(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out) {
  encode_events2_rows(ev, n, zstd_level, out);
}

void encode_recorded_into(const RecordedEvents& ev, int zstd_level, EncodedFrame& out) {
  encode_events2_recorded(ev, zstd_level, out);
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
  if (h.type == static_cast<uint16_t>(FrameType::Events2)) {
    if (events2_min_raw_len(h.count) > h.raw_len) fail("raw_len too small for the event count");
    auto [raw, raw_len] = frame_bytes(h, FrameType::Events2, payload, len);
    out.resize(h.count);
    decode_events2(raw, raw_len, out);
    return;
  }
  // Version 1: every event takes at least 8 bytes (one per column), the table size one more:
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
