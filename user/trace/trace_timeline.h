// What every analysis command needs from a single node's trace before it looks at
// events: the trace opened with a clear error, its timeline (origin, end, TSC
// frequency) and channel names resolved to ids.
//
// Periods of throughput, rates and the report are aligned to the trace origin:
// the recorder's start instant (meta.json "start"."tsc", which is also the first
// correlation point), so two commands asked for the same period cut the trace at
// the same instants.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "trace/trace_reader.h"

namespace cptrace {

// Opens DIR (a trace directory or its events.cpt). Throws std::runtime_error
// naming the path when it does not exist or is a directory without events.cpt;
// TraceError for a file that is not a cptrace trace.
std::unique_ptr<TraceReader> open_trace(const std::string& dir);

// How a command that read a trace to its end leaves when the trace is damaged: what it
// printed covers only the events before the first bad frame, so it says so on stderr
// ("cptrace COMMAND: ERROR (COVERED)", after flushing stdout so the note comes last) and
// the exit code tells scripts the output is partial. Returns 0 for an undamaged trace.
int damaged_trace_exit(const TraceReader& r, std::string_view covered);

struct Timeline {
  uint64_t origin = 0;  // TSC of the trace start
  uint64_t end = 0;  // TSC of the trace stop (meta "stop"."tsc", else the last correlation point)
  double hz = 0;  // TSC ticks per second, measured
  std::string hz_source;
  double seconds(uint64_t ts) const { return (double(int64_t(ts - origin))) / hz; }
  double ticks_to_s(double ticks) const { return ticks / hz; }
};

// Throws std::runtime_error when no frequency is known (no meta.json "tsc_hz"
// and fewer than two correlation points) or no origin can be found.
Timeline trace_timeline(const TraceReader& r);
// The same from a trace's parts (a trace followed while it is written): its
// meta.json, its correlation points in file order and the map built from them;
// `path` names the trace in errors.
Timeline trace_timeline(const TraceMeta& meta, const std::vector<ClockPoint>& pts, const ClockMap& map,
                        const std::string& path);

// A channel by name (or "0x<hex id>"), else std::runtime_error listing the
// channels the trace knows.
uint64_t resolve_channel(const TraceReader& r, const std::string& name);

// Period length in ticks for `period_ms`; throws naming the flag and value when
// it is not a finite positive number, shorter than one tick, or would cut
// [origin, end] into more than `max_periods` periods.
uint64_t period_ticks(const Timeline& t, double period_ms, const std::string& flag, uint64_t max_periods = 10'000'000);

// Index of the period holding ts (negative for events before the origin:
// batch-path stamps taken before the recorder started).
// Computed in unsigned arithmetic: -d would overflow for a stamp 2^63 ticks
// before the origin.
inline int64_t period_index(const Timeline& t, uint64_t ts, uint64_t period) {
  uint64_t d = ts - t.origin;
  if (int64_t(d) >= 0) return int64_t(d / period);
  uint64_t before = uint64_t(0) - d;  // ticks before the origin, 1 .. 2^63
  return -int64_t(before / period + (before % period != 0));
}

}  // namespace cptrace
