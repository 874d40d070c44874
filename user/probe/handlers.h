// Channel handlers: parsing, configuration patterns, the BPF `handlers` map and
// the history of changes written to the trace.
//
// A handler decides, inside the BPF program, what a channel's events leave
// behind (semantics exact, and tested in tests/integration/test_handlers.cpp):
//   id              every event (the default)
//   downsample N    the 1st, N+1-th, 2N+1-th ... event of the channel, counted in
//                   one global order over all CPUs and threads (an atomic
//                   counter), from the instant the handler took effect
//   xoy X Y         events whose tuple id satisfies id % Y < X (the same tuples
//                   survive on every channel, so durations can still be computed)
//   firstlast       the first and the last event of the handler's period (from
//                   when it took effect to the end of the recording or the next
//                   change); the last one is written when the recording stops
//   counter PERIOD  no per-event records: a time series of events per period
//                   (EventKind::Count). PERIOD: a number with unit ns|us|ms|s.
//                   Periods are aligned to multiples of PERIOD of the event's
//                   timebase (CLOCK_MONOTONIC for cp_logTS, TSC for the batch path)
//   null            nothing
// Events a handler keeps no per-event record of are counted per CPU as
// "filtered": recorded + dropped + filtered == seen, exactly.
//
// Config file (`cptrace record --config FILE`): one rule per line,
//   PATTERN HANDLER [PARAMS...]      # comment
// PATTERN is an exact channel name or an fnmatch(3) glob (* ? [..]); the FIRST
// matching line wins. A lone `*` line, wherever it stands, sets the default for
// every channel no other line matches (BPF map key 0). Exact names are resolved to ids (FNV-1a, cp_channel_id) and
// installed before the probes see any event. Globs are resolved when the
// recorder learns a channel's name (its announcement, or the registry of a
// process attached with -p); until then (a few ms after cp_open_channel) that
// channel's events follow the default handler. The instant of every install is
// in the history, so analysis knows exactly what each period contains.
//
// History (FrameType::Handlers frames, JSON array; also meta.json "handlers"):
//   {"channel": ID (0 = the default), "name": NAME|"*", "handler": "downsample",
//    "params": [10], "spec": "downsample 10", "gen": G, "source":
//    "config"|"pattern"|"control", "rule": PATTERN,
//    "before": {"mono_ns":..,"tsc":..}, "after": {"mono_ns":..,"tsc":..},
//    "period_ticks": P (counter only: the period of TSC-stamped events)}
// The map update happened between `before` and `after`: a cp_logTS event stamped
// before `before` followed the previous handler, one after `after` the new one
// (struct cp_handler keeps one previous rule: two changes of one channel within
// a single probe run, microseconds apart, would blur this). Batch entries follow
// the handler in force when the batch is handed over.
//
// A recorder killed with SIGKILL loses what the handlers still hold in BPF state:
// the "last" event of a firstlast period and each CPU's current counter period.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "probe/handler_table.h"
#include "trace/trace_format.h"

namespace cptrace {

class Probes;

// What the handlers still hold in BPF state when the probes are detached:
// firstlast "last" events and counter periods not yet emitted. filtered_fix[cpu]
// is how many of the CPU's "filtered" events are now recorded after all (the
// firstlast last events): subtract it from the filtered counter.
struct HeldEvents {
  std::vector<TraceEvent> events;
  std::vector<uint64_t> filtered_fix;
};
// A table writing the `handlers` map of these probes.
std::unique_ptr<HandlerTable> make_handler_table(Probes& probes, double tsc_hz);

HeldEvents collect_held_events(int last_slots_fd, int count_slots_fd);

}  // namespace cptrace
