// The on-disk trace: a directory per node per recording.
//
//   DIR/meta.json    self-description (node, host, kernel, CPU, TSC flags and
//                    frequency, boot id, start/stop, command, channel table,
//                    counters). Written at start, rewritten (atomically) at stop.
//   DIR/events.cpt   file header + a sequence of independently decodable,
//                    CRC-checked frames. Everything needed to read the events
//                    (correlation stream, channel names, counters) is also in
//                    frames, so a killed recorder's file is readable up to its
//                    last complete frame even when meta.json was never rewritten.
//
// This header is the contract between the collector (writer side) and every
// later command (reader side).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "clock/clock_point.h"

namespace cptrace {

constexpr char kFileMagic[8] = {'C', 'P', 'T', 'R', 'A', 'C', 'E', '1'};
// Version 2 writes events as Events2 frames. Version 1 files (events as
// FrameType::Events) are read too; a build older than version 2 refuses a
// version-2 file by its header instead of reading it as holding no events.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kOldestFormatVersion = 1;
constexpr uint32_t kFrameMagic = 0x52465043;  // "CPFR" little-endian

enum class FrameType : uint16_t {
  Events = 1,  // columnar delta/varint-encoded TraceEvents, zstd-compressed (version 1)
  Clock = 2,  // ClockPoints (TSC <-> CLOCK_MONOTONIC correlation stream)
  Channels = 3,  // JSON: [{"id":..,"name":..,"pid":..}]
  Counters = 4,  // JSON: {"seen":[per cpu], "dropped":[per cpu], ...} snapshot, last wins
  Net = 5,  // network events (socket and packet level), see include/cptrace_net.h
  Sync = 6,  // JSON: MinRTT probe rounds with a peer, see sync_round.h
  Handlers = 7,  // JSON: channel handler changes, each with the instant it took effect
  Translated = 8,  // events of a merged trace on the reference TSC, see translated_frame.h
  Processes = 9,  // JSON: host pid -> pid in its own pid namespace, see pid_table.h
  Clock2 = 10,  // ClockPoints, version 2: also CLOCK_MONOTONIC_RAW and REALTIME - MONOTONIC
                // (56-byte records; version 1 is Clock: 24-byte records, the first 24 bytes)
  ClockAdjust = 11,  // JSON: clock adjustments the recorder saw, see clock_adjust.h
  Net2 = 12,  // network events, version 2: 104-byte records, version 1's 96 bytes then the
              // owner's cgroup id (Net holds version 1)
  Events2 = 13,  // events, version 2: runs of shared fields and byte-width groups
                 // (events2_codec.h); Events holds version 1 (varint columns)
};

// Fixed 24-byte frame header, little-endian, followed by payload_len bytes.
struct FrameHeader {
  uint32_t magic;  // kFrameMagic
  uint16_t type;  // FrameType
  uint16_t flags;  // bit 0: payload is zstd-compressed
  uint32_t payload_len;  // bytes following this header
  uint32_t raw_len;  // decoded payload size in bytes
  uint32_t count;  // records in the frame
  uint32_t crc32;  // zlib crc32 over the first 20 header bytes and the payload
};
static_assert(sizeof(FrameHeader) == 24);

// Timebase of a raw timestamp as recorded.
enum class Timebase : uint8_t {
  Tsc = 0,  // already in the node's TSC ticks, read on some CPU (rdtsc in user space)
  MonoNs = 1,  // CLOCK_MONOTONIC ns (bpf_ktime_get_ns); the reader converts to TSC
  TscOnCpu = 2,  // TSC ticks read on CPU `cpu` (rdtscp): two stamps of one CPU
                 // differ by no cross-CPU skew (docs/clock.md "TSC trust")
};
constexpr uint8_t kLastTimebase = uint8_t(Timebase::TscOnCpu);
inline bool is_tsc(uint8_t timebase) { return timebase != uint8_t(Timebase::MonoNs); }

enum class EventKind : uint8_t {
  User = 1,  // cp_logTS / batch entry
  ChannelClose = 2,  // cp_close_channel
  Count = 3,  // `counter` handler: tuple = events of `channel` on one CPU in the
              // period starting at ts (period: the Handlers history)
};

// One decoded event. In events.cpt `ts` is stored in its recorded timebase;
// TraceReader hands events out with ts converted to TSC and timebase == Tsc.
struct TraceEvent {
  uint64_t ts = 0;
  uint64_t channel = 0;
  uint64_t tuple = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint16_t cpu = 0;
  uint8_t kind = 0;  // EventKind
  uint8_t timebase = 0;  // Timebase
  // Set by the reader for a converted kernel stamp: the true TSC instant is in
  // [ts - ts_err, ts + ts_err] (ClockMap::mono_to_stamp); 0 for TSC stamps.
  // Not stored in events.cpt.
  uint64_t ts_err = 0;  // full width: never clamped to fit a field
  bool operator==(const TraceEvent&) const = default;
};

// On disk: version 1 (FrameType::Clock) stores the first 24 bytes of each point,
// version 2 (FrameType::Clock2) all 56.
constexpr size_t kClockPointV1Bytes = 24;
constexpr size_t kClockPointV2Bytes = sizeof(ClockPoint);

struct ChannelInfo {
  uint64_t id = 0;
  std::string name;
  uint32_t pid = 0;
};

// Per-CPU counters, in events. recorded + dropped + filtered == seen, where
// filtered counts the events a channel handler kept no record of (user/probe/handlers.h).
struct Counters {
  std::vector<uint64_t> seen;
  std::vector<uint64_t> dropped;
  std::vector<uint64_t> filtered;
  std::vector<uint64_t> series_lost;  // `counter` events missing from the series (also filtered)
  uint64_t total_seen() const;
  uint64_t total_dropped() const;
  uint64_t total_filtered() const;
};

// ---- Frame and file-header helpers (trace_format.cpp) ----------------------------
// The format is little-endian and the structs above are written as they lie in
// memory, so only little-endian hosts can read or write it directly.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "cptrace trace files are little-endian");

// events.cpt starts with kFileMagic, u32 kFormatVersion, u32 reserved (0).
constexpr size_t kFileHeaderSize = 16;
// FrameHeader::flags bit 0.
constexpr uint16_t kFrameZstd = 1;
// Bit 1, Translated frames only: each record's cpu varint is (cpu << 1 | 1 if
// the stamp was read on that CPU's TSC). Frames without it (written before)
// name the CPU the probe fired on, never a stamp's.
constexpr uint16_t kFrameCpuStamped = 2;
// Hard limits a reader enforces before allocating anything, so a hostile or
// corrupt header cannot make it allocate gigabytes. Writers stay well below.
constexpr uint32_t kMaxPayloadBytes = 64u << 20;
constexpr uint32_t kMaxRawBytes = 64u << 20;
constexpr uint32_t kMaxFrameEvents = 1u << 20;  // encode_events() refuses more

// The 16-byte file header of events.cpt.
std::string file_header_bytes();
// Throws TraceError(file, 0, ...) unless `data` (len bytes) starts with a valid
// file header of a version this library reads.
void check_file_header(const std::string& file, const void* data, size_t len);

// zlib crc32 over the first 20 header bytes (everything but crc32) and the payload.
uint32_t frame_crc(const FrameHeader& h, const void* payload, size_t len);
// Sets magic, payload_len and crc32 for `payload`; type, flags, raw_len and
// count must already be filled in.
void seal_frame(FrameHeader& h, const void* payload, size_t len);
// nullptr if the header is plausible (magic, limits), else what is wrong with it.
// Says nothing about the CRC, which needs the payload.
const char* frame_header_problem(const FrameHeader& h);
bool frame_crc_ok(const FrameHeader& h, const void* payload, size_t len);

// Error with the file and byte offset of what was wrong.
class TraceError : public std::runtime_error {
 public:
  TraceError(std::string file, uint64_t offset, const std::string& what)
      : std::runtime_error(file + " at byte " + std::to_string(offset) + ": " + what),
        file_(std::move(file)),
        offset_(offset) {}
  const std::string& file() const { return file_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string file_;
  uint64_t offset_;
};

}  // namespace cptrace
