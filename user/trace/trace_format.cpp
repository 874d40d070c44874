// Counters totals and the frame/file-header helpers shared by writer and reader.
#include "trace/trace_format.h"

#include <cstring>
#include <numeric>

#include <libdeflate.h>

namespace cptrace {

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
  if (version < kOldestFormatVersion || version > kFormatVersion)
    throw TraceError(file, 8,
                     "unsupported format version " + std::to_string(version) + " (this build reads " +
                         std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) + ")");
}

uint32_t frame_crc(const FrameHeader& h, const void* payload, size_t len) {
  static_assert(offsetof(FrameHeader, crc32) == 20);
  // zlib's CRC-32, from libdeflate: the same value, folded with carry-less
  // multiplication where the CPU has it (several times zlib 1.2's speed; every
  // frame's CRC is computed when written and each time it is read).
  return libdeflate_crc32(libdeflate_crc32(0, &h, offsetof(FrameHeader, crc32)), payload, len);
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
  if ((h.flags & ~(kFrameZstd | kFrameCpuStamped)) != 0) return "unknown frame flags";
  if ((h.flags & kFrameCpuStamped) && h.type != uint16_t(FrameType::Translated)) return "unknown frame flags";
  if (!(h.flags & kFrameZstd) && h.raw_len != h.payload_len) return "uncompressed frame with raw_len != payload_len";
  return nullptr;
}

bool frame_crc_ok(const FrameHeader& h, const void* payload, size_t len) {
  return len == h.payload_len && frame_crc(h, payload, len) == h.crc32;
}

}  // namespace cptrace
