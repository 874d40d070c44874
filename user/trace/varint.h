// Varints (LEB128), zigzag deltas and a bounds-checked cursor over decoded
// frame bytes: shared by the Events frame codecs (block_codec, events2_codec)
// and the reader's frame check.
#pragma once
#include <endian.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace cptrace::codec {

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

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }
[[noreturn, gnu::noinline]] inline void out_of_range(const char* what) { fail(std::string(what) + " out of range"); }

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
}  // namespace cptrace::codec
