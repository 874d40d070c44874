// Codec of FrameType::Translated frames.
#include "translate/translated_frame.h"

#include <endian.h>

#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <zstd.h>

#include "trace/trace_reader.h"
#include "trace/varint.h"
#include "tables/background_job.h"
#include "tables/parallel_for.h"

namespace cptrace {
namespace {

uint64_t zz(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t unzz(uint64_t z) { return int64_t(z >> 1) ^ -int64_t(z & 1); }
// Differences and sums as the format stores them: wrapping (two's complement).
// Tuple ids are any 64-bit value and a damaged frame any bytes, so a plain
// int64 difference or sum could overflow (undefined); the bits are the same.
int64_t wrap_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

// The low 56 bits of v, 7 to a byte (byte 0 lowest), high bits clear.
inline uint64_t spread7(uint64_t v) {
  v = (v & 0x000000000fffffffull) | ((v & 0x00fffffff0000000ull) << 4);
  v = (v & 0x00003fff00003fffull) | ((v & 0x0fffc0000fffc000ull) << 2);
  return (v & 0x007f007f007f007full) | ((v & 0x3f803f803f803f80ull) << 1);
}

// Writes into a buffer sized beforehand for the worst case (kMaxEventBytes per
// event): no capacity check per byte, which was a large share of translate's
// time. A varint of 2 or more bytes is written as one 8-byte store (within its
// own 10 bytes of that worst case), with no loop whose exit depends on the
// value: hashed tuple ids take 10 bytes.
inline uint8_t* put(uint8_t* p, uint64_t v) {
  if (v < 0x80) {
    *p = uint8_t(v);
    return p + 1;
  }
  const unsigned len = (63 - unsigned(__builtin_clzll(v))) / 7 + 1;  // 2..10 bytes
  uint64_t w = spread7(v);
  if (len <= 8) {
    w |= 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);  // all but the last byte continue
    w = htole64(w);
    std::memcpy(p, &w, 8);
    return p + len;
  }
  w = htole64(w | 0x8080808080808080ull);
  std::memcpy(p, &w, 8);
  v >>= 56;
  if (len == 9) {
    p[8] = uint8_t(v);
    return p + 9;
  }
  p[8] = uint8_t(v) | 0x80;
  p[9] = uint8_t(v >> 7);
  return p + 10;
}

// Ten varints of at most 10 bytes, a new channel's 8-byte id and the kind byte.
constexpr size_t kMaxEventBytes = 10 * 10 + 8 + 1;

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void decode_records(const FrameHeader& h, const uint8_t* data, size_t n, std::vector<TranslatedEvent>& out) {
  // The trace codecs' cursor (trace/varint.h): a multi-byte varint in one
  // 8-byte load, not a loop per byte (the scrambled tuple ids' deltas take 9-10
  // bytes, the stamps' 2-4). Its errors name no frame type: decode_translated
  // adds it.
  codec::Cursor c(data, n);
  const bool stamped = h.flags & kFrameCpuStamped;
  std::vector<uint64_t> chan;
  out.resize(h.count);
  uint64_t prev_ts = 0;
  int64_t prev_off = 0, prev_tuple = 0, prev_pid = 0, prev_tid = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    TranslatedEvent& e = out[i];
    uint64_t node = c.varint();
    if (node > 0xffff) throw std::runtime_error("node index beyond 16 bits");
    e.node = uint16_t(node);
    e.local_ts = prev_ts + uint64_t(unzz(c.varint()));
    int64_t off = wrap_add(prev_off, unzz(c.varint()));
    e.ref_ts = wrap_add(int64_t(e.local_ts), off);
    e.ref_lo = wrap_sub(e.ref_ts, int64_t(c.varint()));
    e.ref_hi = wrap_add(e.ref_ts, int64_t(c.varint()));
    uint64_t idx = c.varint();
    if (idx == chan.size()) chan.push_back(read_u64(c.take(8, "channel id")));
    if (idx >= chan.size()) throw std::runtime_error("channel index out of range");
    e.channel = chan[idx];
    e.tuple = uint64_t(wrap_add(prev_tuple, unzz(c.varint())));
    e.pid = uint32_t(wrap_add(prev_pid, unzz(c.varint())));
    e.tid = uint32_t(wrap_add(prev_tid, unzz(c.varint())));
    uint64_t cpu = c.varint();
    e.cpu_stamped = stamped && (cpu & 1);
    if (stamped) cpu >>= 1;
    if (cpu > 0xffff) throw std::runtime_error("cpu beyond 16 bits");
    e.cpu = uint16_t(cpu);
    e.kind = *c.take(1, "record");
    prev_ts = e.local_ts, prev_off = off, prev_tuple = int64_t(e.tuple), prev_pid = e.pid, prev_tid = e.tid;
  }
  if (c.remaining()) throw std::runtime_error("trailing bytes after the last record");
}

}  // namespace

void encode_translated(const TranslatedEvent* ev, size_t n, int zstd_level, EncodedFrame& out) {
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_translated: too many events for one frame");
  thread_local std::vector<uint8_t> raw;
  // Grown, never shrunk: resizing down and up again zero-filled megabytes per frame.
  if (raw.size() < n * kMaxEventBytes) raw.resize(n * kMaxEventBytes);
  uint8_t* p = raw.data();
  std::unordered_map<uint64_t, uint64_t> chan;
  // Events of a frame mostly repeat the previous event's channel: skip the map then.
  uint64_t last_chan = 0, last_idx = 0;
  bool have_last = false;
  uint64_t prev_ts = 0;
  int64_t prev_off = 0, prev_tuple = 0, prev_pid = 0, prev_tid = 0;
  for (size_t i = 0; i < n; ++i) {
    const TranslatedEvent& e = ev[i];
    if (!(e.ref_lo <= e.ref_ts && e.ref_ts <= e.ref_hi))
      throw std::invalid_argument("translated event with est outside [lo, hi]");
    p = put(p, e.node);
    p = put(p, zz(int64_t(e.local_ts - prev_ts)));
    int64_t off = wrap_sub(e.ref_ts, int64_t(e.local_ts));
    p = put(p, zz(wrap_sub(off, prev_off)));
    p = put(p, uint64_t(wrap_sub(e.ref_ts, e.ref_lo)));
    p = put(p, uint64_t(wrap_sub(e.ref_hi, e.ref_ts)));
    if (have_last && e.channel == last_chan) {
      p = put(p, last_idx);
    } else {
      auto [it, fresh] = chan.try_emplace(e.channel, chan.size());
      p = put(p, it->second);
      if (fresh) std::memcpy(p, &e.channel, 8), p += 8;
      last_chan = e.channel, last_idx = it->second, have_last = true;
    }
    p = put(p, zz(wrap_sub(int64_t(e.tuple), prev_tuple)));
    p = put(p, zz(int64_t(e.pid) - prev_pid));
    p = put(p, zz(int64_t(e.tid) - prev_tid));
    p = put(p, uint64_t(e.cpu) << 1 | uint64_t(e.cpu_stamped));
    *p++ = e.kind;
    prev_ts = e.local_ts, prev_off = off, prev_tuple = int64_t(e.tuple), prev_pid = e.pid, prev_tid = e.tid;
  }
  const size_t raw_len = size_t(p - raw.data());
  if (raw_len > kMaxRawBytes) throw std::invalid_argument("encode_translated: frame too large");
  out.hdr = {};
  out.hdr.type = uint16_t(FrameType::Translated);
  out.hdr.flags = kFrameZstd | kFrameCpuStamped;
  out.hdr.raw_len = uint32_t(raw_len);
  out.hdr.count = uint32_t(n);
  // One context per thread, reused: same output as ZSTD_compress without its
  // per-frame context allocation and setup.
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  // Compressed into a buffer of the worst case's size kept by the thread, then
  // copied: growing the payload to that size zero-filled it for every frame.
  thread_local std::vector<uint8_t> packed;
  if (packed.size() < ZSTD_compressBound(raw_len)) packed.resize(ZSTD_compressBound(raw_len));
  size_t c = ZSTD_compressCCtx(cctx.get(), packed.data(), packed.size(), raw.data(), raw_len, zstd_level);
  if (ZSTD_isError(c)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(c));
  out.payload.assign(packed.data(), packed.data() + c);
  seal_frame(out.hdr, out.payload.data(), out.payload.size());
}

void decode_translated(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<TranslatedEvent>& out) {
  if (h.type != uint16_t(FrameType::Translated)) throw std::runtime_error("not a translated frame");
  if (h.count > kMaxFrameEvents || h.raw_len > kMaxRawBytes) throw std::runtime_error("translated frame beyond limits");
  thread_local std::vector<uint8_t> raw;
  const uint8_t* data = payload;
  size_t n = len;
  if (h.flags & kFrameZstd) {
    raw.resize(h.raw_len);
    size_t d = ZSTD_decompress(raw.data(), raw.size(), payload, len);
    if (ZSTD_isError(d) || d != h.raw_len)
      throw std::runtime_error("translated frame: zstd payload does not decode to raw_len bytes");
    data = raw.data(), n = d;
  }
  try {
    decode_records(h, data, n, out);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("translated frame: ") + e.what());
  }
}

namespace {

struct DecodedFrame {
  std::vector<uint8_t> payload;
  std::vector<TranslatedEvent> events;
  std::exception_ptr error;
};

void decode_batch(const TraceReader& r, unsigned threads, const size_t* pos, size_t n, std::vector<DecodedFrame>& out) {
  parallel_for(threads, n, [&](size_t i, unsigned) {
    DecodedFrame& f = out[i];
    f.error = nullptr;
    try {
      FrameHeader h{};
      r.read_frame(pos[i], h, f.payload);
      decode_translated(h, f.payload.data(), f.payload.size(), f.events);
    } catch (...) {
      f.error = std::current_exception();
    }
  });
}

}  // namespace

void for_each_translated(const TraceReader& r, unsigned threads,
                         const std::function<void(const std::vector<TranslatedEvent>&)>& fn) {
  const std::vector<size_t> pos = r.frame_positions(FrameType::Translated);
  // One thread: read, decode and hand out in turn. More: the next batch is
  // decoded (on all but the calling thread) while this one is handed out.
  const unsigned decoders = threads > 1 ? threads - 1 : 1;
  // Two frames a decoder, at most 8 ahead: decoded frames (~1 MB each) are a
  // fixed cost, outside the budget.
  const size_t batch = threads > 1 ? std::min<size_t>(2 * size_t(decoders), 8) : 1;
  std::vector<DecodedFrame> cur(batch), next(batch);
  auto hand_out = [&](std::vector<DecodedFrame>& frames, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (frames[i].error) std::rethrow_exception(frames[i].error);
      fn(frames[i].events);
    }
  };
  size_t at = std::min(batch, pos.size());
  decode_batch(r, threads > 1 ? threads : 1, pos.data(), at, cur);
  size_t cur_n = at, next_n = 0;
  // One thread decodes ahead for the whole call, not one per batch (610
  // threads started and joined for 5 M tuples).
  std::optional<BackgroundJob> ahead;
  if (threads > 1) ahead.emplace([&] { decode_batch(r, decoders, pos.data() + at, next_n, next); });
  while (cur_n) {
    next_n = std::min(batch, pos.size() - at);
    if (ahead && next_n) {
      ahead->start();
      hand_out(cur, cur_n);  // should it throw, ahead's destructor lets the job finish
      ahead->wait();
    } else {
      hand_out(cur, cur_n);
      decode_batch(r, 1, pos.data() + at, next_n, next);
    }
    at += next_n;
    std::swap(cur, next);
    cur_n = next_n;
  }
}

}  // namespace cptrace
