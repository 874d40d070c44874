// Reads a trace directory written by TraceWriter (layout in trace_format.h).
//
// The constructor scans events.cpt once: it checks every frame's header and CRC
// and decodes the small frames (Clock and Clock2, ClockAdjust, Channels,
// Counters, Sync, Handlers, Processes). Of the large ones it keeps only the
// offsets: Events frames (test-decoded once), Net frames, and the types other
// stages decode themselves (Translated, and types newer than this reader).
// for_each_event() and its kind re-read and decode them one frame at a time, so
// memory stays bounded for traces larger than RAM. Scanning stops at the first bad frame (bad magic or header, CRC
// mismatch, truncation, undecodable payload): everything before it is kept,
// nothing after it is trusted, and error() names its byte offset.
//
// meta.json is optional for reading: events.cpt alone carries everything needed
// to read the events, so a missing or unparsable meta.json only leaves meta()
// empty and says why in meta_problem() (commands that need it, like translate,
// fail with that). A missing events.cpt, one whose file header is missing or
// garbled, or an events.cpt or meta.json that is not a regular file (a FIFO
// would block the reader) throws TraceError.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_adjustment.h"
#include "clock/clock_map.h"
#include "trace/frame_dispatch.h"
#include "trace/net_codec.h"
#include "trace/pid_table.h"
#include "trace/sync_round.h"
#include "trace/trace_format.h"
#include "trace/trace_meta.h"
#include "trace/tsc_skew_history.h"

namespace cptrace {

class ByteSource;

// The label of channel `id` in a channel table: TraceReader::channel_name(), for
// readers that keep their own table (a trace followed while it is written).
std::string channel_label(const std::map<uint64_t, ChannelInfo>& channels, uint64_t id);

class TraceReader {
 public:
  // `path`: a trace directory, or the events.cpt inside one.
  explicit TraceReader(const std::string& path);
  // An events.cpt image in memory (tests, fuzzing). Errors name "events.cpt".
  static TraceReader from_bytes(std::string events_cpt, nlohmann::json meta = {});

  const nlohmann::json& meta() const { return meta_; }
  // meta.json's common facts, typed (defaults when meta.json was not used).
  const TraceMeta& trace_meta() const { return trace_meta_; }
  // Why meta.json was not used ("" when it was).
  const std::string& meta_problem() const { return meta_problem_; }

  // All correlation points in file order, and the map built from them.
  const std::vector<ClockPoint>& clock() const { return clock_; }
  const ClockMap& clock_map() const { return clock_map_; }
  // Clock adjustments the recorder saw (clock_adjust.h), in file order; syscalls'
  // tsc converted through the correlation points (0 with fewer than two).
  const std::vector<ClockAdjustment>& clock_adjustments() const { return clock_adjustments_; }
  // The points, adjustments and meta.json facts the clock models read
  // (clock_history.h); valid while this reader lives.
  ClockHistory clock_history() const { return ClockHistory::from_meta(meta_, clock_map_.points(), clock_adjustments_); }
  // Channel table from the Channels frames; a later announcement of an id wins.
  const std::map<uint64_t, ChannelInfo>& channels() const { return channels_; }
  // The channel's name, or "0x%016x" of the id when it was never announced. A
  // name cut to CP_CHANNEL_NAME_MAX-1 bytes by the recorder gets "...[0x%016x]" of
  // its id appended, so names that differ only after the cut stay distinct.
  std::string channel_name(uint64_t id) const;
  // Host pid -> pid in its own pid namespace, from the Processes frames (empty
  // for a trace recorded before they existed).
  const PidTable& pids() const { return pids_; }
  // The last Counters frame (empty when there was none), parsed and as JSON.
  const Counters& counters() const { return counters_; }
  const nlohmann::json& counters_json() const { return counters_json_; }

  // Events of the valid frames in file order, ts converted to TSC (timebase Tsc,
  // or TscOnCpu for a stamp read on a known CPU).
  // Throws TraceError when kernel-timestamped events exist but fewer than two
  // correlation points do, or when the file changed under the reader.
  void for_each_event(const std::function<void(const TraceEvent&)>& fn) const;
  // Same, one decoded Events frame at a time (cheaper per event).
  void for_each_batch(const std::function<void(const std::vector<TraceEvent>&)>& fn) const;
  // The same frames one by one, for a caller that decodes them on several
  // threads (event_frame_count() of them): frame i's events as for_each_batch
  // hands them out (safe from any thread; same errors).
  void read_events(size_t i, std::vector<TraceEvent>& out) const;
  std::vector<TraceEvent> events() const;

  // Channel handler changes (Handlers frames), in the order they took effect:
  // JSON objects described in user/probe/handlers.h.
  const nlohmann::json& handler_changes() const { return handler_changes_; }
  // Network events (Net frames, `record --net`) in file order, one frame at a time,
  // ts converted from CLOCK_MONOTONIC to TSC through the clock map (r.ktime_ns keeps
  // the raw kernel value). Same errors as for_each_event.
  void for_each_net_event(const std::function<void(const NetEvent&)>& fn) const;
  uint64_t net_event_count() const { return net_count_; }
  uint64_t net_frame_count() const { return net_frames_.size(); }
  // The "net" object of the last Counters frame (empty when absent).
  const Counters& net_counters() const { return net_counters_; }
  // Payloads of the valid frames of one type this reader does not decode itself
  // (Translated, and types newer than this reader), in file order, one frame at a time.
  void for_each_frame(FrameType type,
                      const std::function<void(const FrameHeader&, const std::vector<uint8_t>&)>& fn) const;
  // The same frames one by one, for a caller that decodes them on several
  // threads: their positions (in file order), and the frame at a position
  // (safe from any thread; same checks as for_each_frame).
  std::vector<size_t> frame_positions(FrameType type) const;
  void read_frame(size_t position, FrameHeader& h, std::vector<uint8_t>& payload) const;

  // MinRTT rounds this node initiated (Sync frames), in file order.
  const std::vector<SyncRound>& sync_rounds() const { return sync_; }

  // The first bad frame, if any.
  const std::optional<TraceError>& error() const { return error_; }
  // Whether error() is only a cut-off end: the file ends inside its last frame
  // and nothing after that frame's start looks like another frame. A recorder
  // killed while writing leaves this; any other damage (bad magic, header or CRC,
  // an undecodable payload, a frame length that hides later frames) does not.
  bool truncated_tail() const { return error_ && truncated_tail_; }
  // Bytes of events.cpt up to the end of the last good frame.
  uint64_t valid_bytes() const { return valid_bytes_; }
  uint64_t file_bytes() const { return file_bytes_; }
  uint64_t event_count() const { return event_count_; }
  uint64_t raw_event_bytes() const { return event_count_ * sizeof(TraceEvent); }
  // Good frames of every type, unknown ones included.
  uint64_t frame_count() const { return frame_count_; }
  uint64_t event_frame_count() const { return event_frames_.size(); }
  const std::string& events_path() const { return file_; }

  // How far any CPU's TSC was measured to be from CPU 0's, in ticks (meta.json
  // "tsc" skew_ticks at start and stop; 0 in traces from before it was
  // measured). Every stamp carries it in ts_err: a stamp from one CPU compared
  // with a clock point or a stamp from another is off by up to this. A stamp
  // that names its CPU (TscOnCpu) carries that CPU's own interval instead
  // (tsc_skew().err_on), none on the reference CPU.
  uint64_t tsc_skew_err() const { return skew_.err; }
  const TscSkewHistory& tsc_skew() const { return skew_; }

 private:
  struct EventFrame {
    uint64_t offset;
    FrameHeader hdr;
  };

  TraceReader(std::shared_ptr<const ByteSource> src, std::string file);
  void scan();
  void add_change_candidates();
  void read_tsc_skew();
  bool read_frame(uint64_t off, FrameHeader& h, std::vector<uint8_t>& payload);
  bool magic_after(uint64_t from) const;
  void take_frame(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload);
  void take_net(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload);
  void reread(const EventFrame& f, FrameHeader& h, std::vector<uint8_t>& payload) const;
  void take_events(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload);
  void take_counters(nlohmann::json j);
  void load_meta(const std::string& path);
  void check_convertible() const;
  void convert(std::vector<TraceEvent>& evs) const;

  std::shared_ptr<const ByteSource> src_;
  std::string file_;
  nlohmann::json meta_ = nlohmann::json::object();
  TraceMeta trace_meta_;
  std::string meta_problem_;
  std::vector<ClockPoint> clock_;
  ClockMap clock_map_;
  std::vector<ClockAdjustment> clock_adjustments_;
  std::map<uint64_t, ChannelInfo> channels_;
  PidTable pids_;
  std::vector<SyncRound> sync_;
  nlohmann::json handler_changes_ = nlohmann::json::array();
  Counters counters_;
  nlohmann::json counters_json_ = nlohmann::json::object();
  std::vector<EventFrame> event_frames_;
  std::vector<EventFrame> net_frames_;
  uint64_t net_count_ = 0;
  TscSkewHistory skew_;  // meta.json "tsc": the widest |TSC_k - TSC_0| measured, and per CPU
  Counters net_counters_;
  std::vector<EventFrame> other_frames_;  // frame types decoded by their own stages
  std::optional<TraceError> error_;
  bool truncated_tail_ = false;
  uint64_t valid_bytes_ = 0;
  uint64_t file_bytes_ = 0;
  uint64_t event_count_ = 0;
  uint64_t frame_count_ = 0;
  std::optional<uint64_t> first_mono_frame_;  // offset of the first frame with MonoNs events
};

}  // namespace cptrace
