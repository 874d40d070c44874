// A walk over an Events frame's columns (layout in block_codec.cpp) that checks
// what decode_events_into() checks, without building the events.
#include "trace/events_frame_check.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>

#include "trace/block_codec.h"
#include "trace/events2_codec.h"

namespace cptrace {
namespace {

constexpr uint64_t kHighBits = 0x8080808080808080ull;

// One varint as the decoder reads it: at most 10 bytes, the 10th holding bit 63 only.
bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return shift < 63 || b <= 1;
  }
  return false;
}

// n varints of any 64-bit value; p moves past them. Eight bytes at a time:
// their high bits say where varints end, so a word's varints are counted at
// once (hashed tuple ids take 10 bytes, timestamp deltas a few). Only a varint
// that spans words can exceed 10 bytes or need its 10th byte checked.
bool skip_u64_column(const uint8_t*& p, const uint8_t* end, size_t n) {
  unsigned run = 0;  // bytes of the varint begun before p
  while (n > 0 && end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w = le64toh(w);
    uint64_t stops = ~w & kHighBits;
    if (!stops) {
      run += 8;
      if (run >= 10) return false;
      p += 8;
      continue;
    }
    const unsigned first = static_cast<unsigned>(__builtin_ctzll(stops)) >> 3;
    if (run + first >= 10) return false;
    if (run + first == 9 && ((w >> (8 * first)) & 0xff) > 1) return false;
    // One bit per byte at most: summed by a multiply (no popcount instruction assumed).
    const auto k = static_cast<size_t>(((stops >> 7) * 0x0101010101010101ull) >> 56);
    if (k < n) {
      n -= k;
      run = 7 - ((63 - static_cast<unsigned>(__builtin_clzll(stops))) >> 3);
      p += 8;
      continue;
    }
    for (size_t i = 1; i < n; ++i) stops &= stops - 1;  // the n-th stop is now the lowest
    p += (static_cast<unsigned>(__builtin_ctzll(stops)) >> 3) + 1;
    return true;
  }
  p -= run;  // the last bytes one varint at a time, from the start of the one begun
  uint64_t v;
  for (; n > 0; --n)
    if (!read_varint(p, end, v)) return false;
  return true;
}

// n varints, each at most `max`; p moves past them. Eight one-byte values are
// checked at once: most deltas and channel indices take one byte.
bool skip_column(const uint8_t*& p, const uint8_t* end, size_t n, uint64_t max) {
  // Added to each byte below 0x80, this sets its high bit exactly when the byte exceeds max.
  const uint64_t over = (0x7f - std::min<uint64_t>(max, 0x7f)) * 0x0101010101010101ull;
  while (n > 0) {
    if (n >= 8 && end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      w = le64toh(w);
      if (((w | (w + over)) & kHighBits) == 0) {
        p += 8, n -= 8;
        continue;
      }
    }
    uint64_t v;
    if (!read_varint(p, end, v) || v > max) return false;
    --n;
  }
  return true;
}

// A grouped column of n values (events2_codec.h); each value at most `max`.
bool skip_groups(const uint8_t*& p, const uint8_t* end, size_t n, uint64_t max) {
  for (size_t g = 0; g < n; g += kEvents2Group) {
    const size_t k = std::min(kEvents2Group, n - g);
    if (p == end) return false;
    if (*p == kEvents2SameValue) {
      uint64_t v;
      if (!read_varint(++p, end, v) || v > max) return false;
      continue;
    }
    if (*p > 8) return false;
    const unsigned w = *p++;
    if (static_cast<size_t>(end - p) < k * w) return false;
    if (max != UINT64_MAX && w > 0)
      for (size_t i = 0; i < k; ++i) {
        uint64_t v = 0;
        for (unsigned b = 0; b < w; ++b) v |= uint64_t{p[i * w + b]} << (8 * b);
        if (v > max) return false;
      }
    p += k * w;
  }
  return true;
}

// The run table: rows adding up to count, each pid, tid and cpu in its range,
// every timebase known.
bool skip_runs(const uint8_t*& p, const uint8_t* end, uint32_t count, bool& mono) {
  uint64_t nruns, rows, v;
  if (!read_varint(p, end, nruns) || nruns > count) return false;
  uint64_t covered = 0;
  mono = false;
  for (uint64_t r = 0; r < nruns; ++r) {
    if (!read_varint(p, end, rows) || rows == 0 || rows > count - covered) return false;
    covered += rows;
    if (!read_varint(p, end, v) || v > UINT32_MAX || !read_varint(p, end, v) || v > UINT32_MAX) return false;
    if (!read_varint(p, end, v) || v > UINT16_MAX || end - p < 2 || p[1] > kLastTimebase) return false;
    mono |= p[1] == static_cast<uint8_t>(Timebase::MonoNs);
    p += 2;
  }
  return covered == count;
}

// The channel table both versions start with; nchan: its size.
bool skip_channel_table(const uint8_t*& p, const uint8_t* end, uint32_t count, uint64_t& nchan) {
  if (!read_varint(p, end, nchan) || nchan > count) return false;
  if (static_cast<uint64_t>(end - p) < nchan * sizeof(uint64_t)) return false;
  p += nchan * sizeof(uint64_t);
  return count == 0 || nchan > 0;  // else a channel index without a table
}

}  // namespace

bool event2_columns_decode(const uint8_t* raw, size_t len, uint32_t count, bool& mono) {
  const uint8_t* p = raw;
  const uint8_t* end = raw + len;
  uint64_t nchan;
  if (!skip_channel_table(p, end, count, nchan)) return false;
  if (!skip_runs(p, end, count, mono)) return false;
  if (!skip_groups(p, end, count, UINT64_MAX)) return false;  // ts
  if (count > 0 && !skip_groups(p, end, count, nchan - 1)) return false;  // channel index
  if (!skip_groups(p, end, count, UINT64_MAX)) return false;  // tuple
  return p == end;
}

bool event_columns_decode(const uint8_t* raw, size_t len, uint32_t count, bool& mono) {
  const uint8_t* p = raw;
  const uint8_t* end = raw + len;
  uint64_t nchan;
  if (!skip_channel_table(p, end, count, nchan)) return false;
  if (!skip_u64_column(p, end, count)) return false;  // ts
  if (count > 0 && !skip_column(p, end, count, nchan - 1)) return false;  // channel index
  if (!skip_u64_column(p, end, count)) return false;  // tuple
  if (!skip_column(p, end, count, std::numeric_limits<uint32_t>::max())) return false;  // pid
  if (!skip_column(p, end, count, std::numeric_limits<uint32_t>::max())) return false;  // tid
  if (!skip_column(p, end, count, std::numeric_limits<uint16_t>::max())) return false;  // cpu
  if (static_cast<size_t>(end - p) != 2 * size_t{count}) return false;  // kind and timebase, nothing after
  const uint8_t* tb = p + count;
  mono = false;
  for (size_t i = 0; i < count; ++i) {
    if (tb[i] > kLastTimebase) return false;
    mono |= tb[i] == static_cast<uint8_t>(Timebase::MonoNs);
  }
  return true;
}

bool events_frame_decodes(const FrameHeader& h, const uint8_t* payload, size_t len, bool& mono) {
  // The decoder's checks before it decompresses anything.
  if (h.count > kMaxFrameEvents) return false;
  if (h.type == static_cast<uint16_t>(FrameType::Events2)) {
    if (events2_min_raw_len(h.count) > h.raw_len) return false;
    try {
      auto [raw, raw_len] = frame_bytes(h, FrameType::Events2, payload, len);
      return event2_columns_decode(raw, raw_len, h.count, mono);
    } catch (const std::exception&) {
      return false;
    }
  }
  if (uint64_t{h.count} * 8 + 1 > h.raw_len) return false;
  try {
    auto [raw, raw_len] = frame_bytes(h, FrameType::Events, payload, len);
    return event_columns_decode(raw, raw_len, h.count, mono);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace cptrace
