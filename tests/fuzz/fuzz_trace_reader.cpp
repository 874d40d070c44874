// libFuzzer target: any bytes as events.cpt must give a TraceReader or a
// TraceError, and iterating its events must never crash, leak or hang.
//
// Random mutations almost never keep a frame CRC valid, so every input is read
// twice: as is (exercising framing and CRC checks), and with each frame's CRC
// recomputed (exercising the payload decoders behind the CRC).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "trace/trace_reader.h"

using namespace cptrace;

namespace {

// Walks the frames the way the reader does and rewrites each stored CRC.
std::string with_fixed_crcs(std::string b) {
  size_t off = kFileHeaderSize;
  while (off + sizeof(FrameHeader) <= b.size()) {
    FrameHeader h;
    std::memcpy(&h, b.data() + off, sizeof h);
    size_t end = off + sizeof h + h.payload_len;
    if (h.payload_len > b.size() || end > b.size()) break;
    h.crc32 = frame_crc(h, b.data() + off + sizeof h, h.payload_len);
    std::memcpy(b.data() + off, &h, sizeof h);
    off = end;
  }
  return b;
}

void read_all(std::string bytes) {
  try {
    TraceReader r = TraceReader::from_bytes(std::move(bytes));
    uint64_t n = 0, sum = 0;
    r.for_each_event([&](const TraceEvent& e) {
      ++n;
      sum += e.ts ^ e.channel;
    });
    if (n != r.event_count()) __builtin_trap();  // the scan and the stream must agree
    uint64_t nn = 0;
    r.for_each_net_event([&](const NetEvent& e) {
      ++nn;
      sum += e.ts ^ e.r.seq;
    });
    if (nn != r.net_event_count()) __builtin_trap();
    for (const auto& [id, c] : r.channels()) sum += r.channel_name(id).size() + c.pid;
    sum += r.counters().total_seen() + r.counters().total_dropped() + r.clock().size();
    if (r.valid_bytes() > r.file_bytes()) __builtin_trap();
    (void)sum;
  } catch (const TraceError&) {
    // a rejected file header, or kernel timestamps without clock points
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  read_all(bytes);
  read_all(with_fixed_crcs(std::move(bytes)));
  return 0;
}
