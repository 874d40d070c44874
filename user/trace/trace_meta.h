// The facts of a recorded trace's meta.json that readers act on, read once and
// typed: which node, where its recording starts and stops on its TSC, its TSC
// frequency, whether it finished and what it recorded of the network. The rest
// of meta.json (handlers, counters, clock discipline...) is read by the one
// stage that needs it.
//
// Absent keys leave their defaults (hand-made and older traces lack some); a
// key of the wrong kind is refused, naming it, instead of being taken as
// absent: a node called 5 or a start.tsc of "12" is a damaged file, not one
// without a node name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace cptrace {

// One instant as the recorder read it on its three clocks (meta.json "start",
// "stop"): realtime_ns and mono_ns in ns, tsc in ticks.
struct RecordedInstant {
  std::optional<int64_t> realtime_ns, mono_ns;
  std::optional<uint64_t> tsc;
};

struct TraceMeta {
  std::string node;  // "" when the recording was not named
  RecordedInstant start, stop;
  double tsc_hz = 0;  // the recorder's measure of the TSC; 0 when it gave none
  bool complete = false;  // the recorder finished (its last write)
  // record --net: packets kept in the trace, and whether send calls were
  // stamped too (--net-send-calls: the application's view in netlat --writes).
  uint64_t recorded_net_events = 0;
  bool net_send_calls = false;

  // REALTIME - MONOTONIC at the start, when both were written and fit.
  std::optional<int64_t> start_rt_minus_mono_ns() const;

  // Throws std::runtime_error "KEY: ..." for a key of the wrong kind.
  static TraceMeta from_json(const nlohmann::json& meta);
};

// DIR/meta.json read and typed without opening the events (a run's nodes seen
// from outside: report, top). Throws std::runtime_error naming the file.
TraceMeta read_trace_meta(const std::string& dir);

// DIR/meta.json read again while its recorder may still rewrite it (top): the
// recorder replaces it by rename, so a read sees one version or the other.
// Missing, unreadable or damaged: `meta` and `info` keep the last one read.
void reread_trace_meta(const std::string& dir, nlohmann::json& meta, TraceMeta& info);

}  // namespace cptrace
