// FrameType::Events2: events in a payload built for cheap writing and reading.
// The recorder encodes every recorded event and the readers decode every one,
// so neither side has a branch per value: values are stored in groups of 32 at
// one byte width per group (0..8 bytes, the group's widest value), not as
// varints, and the fields a ring record gives once (pid, tid, cpu, kind,
// timebase) are stored once per run of rows, not once per row.
//
// Payload, before zstd (varints LEB128; zz = zigzag of the wrapping difference
// to the previous value, the first against 0):
//   varint nchan, then nchan × u64 LE      channel ids in order of first appearance
//   varint nruns, then per run:            rows sharing these fields, in row order
//     varint rows (>= 1), zz pid, zz tid (u32), zz cpu (u16), u8 kind, u8 timebase
//   three grouped columns, each of count values in groups of 32 (the last one
//   shorter): u8 width w (0..8), then the group's values, w bytes each, LE;
//   or u8 9 and one varint, the value of every member:
//     ts      zz of the previous event's ts (u64)
//     channel index into the table
//     tuple   zz of the previous event's tuple (u64)
// Nothing follows the tuple column. The rows of the runs add up to the count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trace/recorded_events.h"
#include "trace/trace_format.h"

namespace cptrace {

struct EncodedFrame;

constexpr size_t kEvents2Group = 32;
constexpr uint8_t kEvents2SameValue = 9;  // a group's width byte: every value the same

// n <= kMaxFrameEvents (std::invalid_argument otherwise).
void encode_events2_recorded(const RecordedEvents& ev, int zstd_level, EncodedFrame& out);
void encode_events2_rows(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out);

// The fewest decoded bytes a frame of `count` events can have: checked before
// anything is decompressed or allocated.
uint64_t events2_min_raw_len(uint32_t count);

// Decodes the payload bytes `raw` (already decompressed) into out, whose size
// is the frame's count. Throws std::runtime_error on any inconsistency.
void decode_events2(const uint8_t* raw, size_t len, std::vector<TraceEvent>& out);

}  // namespace cptrace
