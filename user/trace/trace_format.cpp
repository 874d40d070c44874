// Counters totals and the frame/file-header helpers shared by writer and reader.
#include "trace/trace_format.h"

#include <cstring>
#include <numeric>

#include <immintrin.h>
#include <zlib.h>

namespace cptrace {
namespace {

// zlib's crc32 of 64 bytes and more, folded with carry-less multiplications
// (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", as in
// Chromium's zlib): the same value, several times faster than zlib 1.2's
// tables. Every frame's CRC is computed when it is written and each time it is
// read (translate: three times over its bytes). len >= 64 and a multiple of 16;
// crc is the running value, not inverted (zlib's convention: pass and get ~).
#define CPTRACE_CLMUL __attribute__((target("pclmul,sse4.1")))

CPTRACE_CLMUL inline __m128i load16(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
// x folded 128 bits forward by the constants k, plus the next 16 bytes.
CPTRACE_CLMUL inline __m128i fold16(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x11), _mm_clmulepi64_si128(x, k, 0x00)), next);
}

CPTRACE_CLMUL uint32_t crc32_fold(const unsigned char* buf, size_t len, uint32_t crc) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x1 = load16(buf), x2 = load16(buf + 16), x3 = load16(buf + 32), x4 = load16(buf + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(int(crc)));
  __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64, len -= 64;
  for (; len >= 64; buf += 64, len -= 64) {
    x1 = fold16(x1, x0, load16(buf)), x2 = fold16(x2, x0, load16(buf + 16));
    x3 = fold16(x3, x0, load16(buf + 32)), x4 = fold16(x4, x0, load16(buf + 48));
  }
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold16(x1, x0, x2), x1 = fold16(x1, x0, x3), x1 = fold16(x1, x0, x4);
  for (; len >= 16; buf += 16, len -= 16) x1 = fold16(x1, x0, load16(buf));
  // 128 bits to 64, then Barrett reduction to 32.
  __m128i x5 = _mm_clmulepi64_si128(x1, x0, 0x10);
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x5);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x5 = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), x0, 0x00), x5);
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x5 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), x0, 0x10);
  x5 = _mm_clmulepi64_si128(_mm_and_si128(x5, low32), x0, 0x00);
  return uint32_t(_mm_extract_epi32(_mm_xor_si128(x1, x5), 1));
}

bool have_clmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}

// zlib's crc32(crc, data, len), the same value.
uint32_t crc32_update(uint32_t crc, const void* data, size_t len) {
  auto p = static_cast<const unsigned char*>(data);
  if (len >= 64 && have_clmul()) {
    const size_t chunk = len & ~size_t(15);
    crc = ~crc32_fold(p, chunk, ~crc);
    p += chunk, len -= chunk;
  }
  // zlib takes uInt lengths; payloads are capped far below 4 GiB, but be exact anyway.
  while (len > 0) {
    uInt n = len > (1u << 30) ? (1u << 30) : static_cast<uInt>(len);
    crc = uint32_t(crc32(crc, p, n));
    p += n;
    len -= n;
  }
  return crc;
}

}  // namespace

uint64_t Counters::total_seen() const { return std::accumulate(seen.begin(), seen.end(), uint64_t{0}); }

uint64_t Counters::total_dropped() const { return std::accumulate(dropped.begin(), dropped.end(), uint64_t{0}); }

uint64_t Counters::total_filtered() const { return std::accumulate(filtered.begin(), filtered.end(), uint64_t{0}); }

std::string file_header_bytes() {
  std::string h(kFileHeaderSize, '\0');
  std::memcpy(h.data(), kFileMagic, sizeof kFileMagic);
  std::memcpy(h.data() + 8, &kFormatVersion, sizeof kFormatVersion);
  return h;  // the reserved word stays 0
}

void check_file_header(const std::string& file, const void* data, size_t len) {
  if (len < kFileHeaderSize)
    throw TraceError(
        file, 0,
        "truncated file header (" + std::to_string(len) + " of " + std::to_string(kFileHeaderSize) + " bytes)");
  if (std::memcmp(data, kFileMagic, sizeof kFileMagic) != 0)
    throw TraceError(file, 0, "not a cptrace events file (bad file magic)");
  uint32_t version;
  std::memcpy(&version, static_cast<const char*>(data) + 8, sizeof version);
  if (version != kFormatVersion)
    throw TraceError(file, 8,
                     "unsupported format version " + std::to_string(version) + " (this build reads " +
                         std::to_string(kFormatVersion) + ")");
}

uint32_t frame_crc(const FrameHeader& h, const void* payload, size_t len) {
  static_assert(offsetof(FrameHeader, crc32) == 20);
  return crc32_update(crc32_update(0, &h, offsetof(FrameHeader, crc32)), payload, len);
}

void seal_frame(FrameHeader& h, const void* payload, size_t len) {
  h.magic = kFrameMagic;
  h.payload_len = static_cast<uint32_t>(len);
  h.crc32 = frame_crc(h, payload, len);
}

const char* frame_header_problem(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return "bad frame magic";
  if (h.payload_len > kMaxPayloadBytes) return "payload_len beyond limit";
  if (h.raw_len > kMaxRawBytes) return "raw_len beyond limit";
  if ((h.flags & ~kFrameZstd) != 0) return "unknown frame flags";
  if (!(h.flags & kFrameZstd) && h.raw_len != h.payload_len) return "uncompressed frame with raw_len != payload_len";
  return nullptr;
}

bool frame_crc_ok(const FrameHeader& h, const void* payload, size_t len) {
  return len == h.payload_len && frame_crc(h, payload, len) == h.crc32;
}

}  // namespace cptrace
