// Frame payload encoding: events (columnar, zstd), clock points and JSON
// frames. Every frame is self-contained — no state crosses frame boundaries —
// so any frame can be decoded (and its CRC checked) on its own.
//
// The encoders write Events2 frames (events2_codec.h); the decoders read them
// and version 1, FrameType::Events, which recorders wrote before.
//
// Events version 1 payload, before zstd (all varints are LEB128, "zz" = zigzag of the
// wrapping difference to the previous event's value in this frame, first event
// against 0):
//   varint  nchan, then nchan × u64 LE    channel ids in order of first appearance
//   count × zz varint   ts
//   count × varint      channel index into that table
//   count × zz varint   tuple
//   count × zz varint   pid, then tid (32-bit wrapping differences)
//   count × zz varint   cpu (16-bit wrapping differences)
//   count × u8          kind, then timebase
// Channel ids are 64-bit hashes, so their deltas would be as wide as the ids; a
// per-frame table turns them into one-byte indices.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/recorded_events.h"
#include "trace/trace_format.h"

namespace cptrace {

struct EncodedFrame {
  FrameHeader hdr{};
  std::vector<uint8_t> payload;
};

// zstd_level: 0 stores the columns uncompressed; any other value is passed to zstd
// (negative = zstd's fast levels). A frame is also stored uncompressed whenever
// zstd would not make it smaller. n must be <= kMaxFrameEvents (else
// std::invalid_argument): the collector cuts blocks well below that.
EncodedFrame encode_events(const TraceEvent* ev, size_t n, int zstd_level = 1);
// Same, reusing out's payload capacity (no allocation in steady state).
void encode_events_into(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out);
// The same frame (byte for byte) from columns.
void encode_recorded_into(const RecordedEvents& ev, int zstd_level, EncodedFrame& out);
// A version-1 frame, as recorders wrote them before Events2: for the tests and
// fuzzing seeds that keep old traces readable.
void encode_events_version1(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out);
EncodedFrame encode_clock(const std::vector<ClockPoint>& pts);
// type is Channels or Counters; count is the number of records the JSON holds.
EncodedFrame encode_json(FrameType type, const std::string& json, uint32_t count);

// Decoders check the header against the payload (type, lengths, count) and throw
// std::runtime_error on any inconsistency; they never read out of bounds and never
// allocate more than the header limits of trace_format.h allow. They do NOT check
// the CRC — see frame_crc_ok().
std::vector<TraceEvent> decode_events(const FrameHeader& h, const uint8_t* payload, size_t len);
// Same, into `out` (cleared first, capacity reused).
void decode_events_into(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<TraceEvent>& out);
std::vector<ClockPoint> decode_clock(const FrameHeader& h, const uint8_t* payload, size_t len);
std::string decode_json(const FrameHeader& h, const uint8_t* payload, size_t len);

// Building blocks for other frame codecs (net_codec.cpp). finish_frame fills
// out.hdr/out.payload from `raw` (zstd when smaller and level != 0) and seals it;
// frame_bytes checks the header against the payload (type, limits, lengths) and
// returns the decoded bytes (the payload itself or a thread-local buffer valid
// until the next call), throwing std::runtime_error on any inconsistency.
void finish_frame(EncodedFrame& out, FrameType type, const uint8_t* raw, size_t raw_len, uint32_t count, int level);
std::pair<const uint8_t*, size_t> frame_bytes(const FrameHeader& h, FrameType want, const uint8_t* payload, size_t len);

}  // namespace cptrace
