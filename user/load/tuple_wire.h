// What the load generator puts on the wire and the sink takes off it: fixed-size
// tuples of `size` bytes (16..65507 for UDP), little-endian, one UDP datagram or a
// back-to-back stream on TCP. The header carries the size, so a TCP reader finds
// the next tuple without any handshake, and a magic, so a desynchronised stream
// is detected at once instead of being counted as garbage ids.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

namespace cptrace {

constexpr uint32_t kTupleMagic = 0x47545043;  // "CPTG"
constexpr uint32_t kTupleMinSize = 16;
constexpr uint32_t kTupleMaxUdp = 65507;  // largest IPv4 UDP payload
constexpr uint32_t kTupleMaxTcp = 1 << 20;

struct TupleHeader {
  uint32_t magic;
  uint32_t size;  // whole tuple, header included
  uint64_t id;
};
static_assert(sizeof(TupleHeader) == kTupleMinSize);

// `n` tuples of `size` bytes back to back, serialized once; only the ids change
// per emission (patch_id), so emitting costs no serialization.
inline std::vector<uint8_t> preserialize(uint32_t size, unsigned n) {
  std::vector<uint8_t> buf(size_t(size) * n);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i % size);  // recognizable filler
  for (unsigned k = 0; k < n; ++k) {
    TupleHeader h{kTupleMagic, size, 0};
    memcpy(buf.data() + size_t(k) * size, &h, sizeof h);
  }
  return buf;
}

inline void patch_id(uint8_t* tuple, uint64_t id) { memcpy(tuple + offsetof(TupleHeader, id), &id, 8); }

// Header of the tuple at `p` (at least 16 bytes readable); false if not a tuple.
inline bool parse_header(const uint8_t* p, TupleHeader& h, uint32_t max_size) {
  memcpy(&h, p, sizeof h);
  return h.magic == kTupleMagic && h.size >= kTupleMinSize && h.size <= max_size;
}

}  // namespace cptrace
