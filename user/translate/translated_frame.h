// FrameType::Translated (8): events of a merged, translated trace (`cptrace
// translate`). Each record keeps the event as recorded on its node (node index,
// local TSC) plus its instant on the reference node's TSC: the estimate and the
// strict bound [lo, hi]. Which node an index names, and the clock relations that
// produced the bounds, are in the translated trace's meta.json.
//
// Payload before zstd, one row per record (varints LEB128, zz = zigzag):
//   varint node; zz (local_ts - previous local_ts); zz (ref - local - previous such);
//   varint (ref - lo); varint (hi - ref); varint channel index (a new index is
//   followed by the 8-byte channel id: a per-frame table); zz tuple delta;
//   zz pid delta; zz tid delta; varint (cpu << 1 | cpu_stamped) (kFrameCpuStamped;
//   older frames: varint cpu); u8 kind.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "trace/block_codec.h"
#include "trace/trace_format.h"

namespace cptrace {

struct TranslatedEvent {
  uint64_t local_ts = 0;
  int64_t ref_ts = 0, ref_lo = 0, ref_hi = 0;
  uint64_t channel = 0, tuple = 0;
  uint32_t pid = 0, tid = 0;
  uint16_t cpu = 0, node = 0;
  uint8_t kind = 0;
  bool cpu_stamped = false;  // the stamp was read on `cpu`'s TSC (Timebase::TscOnCpu)
  bool operator==(const TranslatedEvent&) const = default;
};

// n <= kMaxFrameEvents; lo <= ref <= hi for every record (std::invalid_argument otherwise).
void encode_translated(const TranslatedEvent* ev, size_t n, int zstd_level, EncodedFrame& out);
// Checks lengths and count; throws std::runtime_error on any inconsistency.
void decode_translated(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<TranslatedEvent>& out);

class TraceReader;
// The Translated frames of `r`, read and decoded on `threads` threads while the
// calling thread hands the frames before them to fn(events), one frame at a
// time in file order. An error (a damaged frame) is raised when its frame's
// turn comes, after fn had every frame before it: as a sequential reading.
void for_each_translated(const TraceReader& r, unsigned threads,
                         const std::function<void(const std::vector<TranslatedEvent>&)>& fn);

}  // namespace cptrace
