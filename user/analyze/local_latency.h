// Same-node latency: the minimal filler of the latency table (latency_table.h)
// for two channels of ONE node's trace. Cross-node durations come from
// translation, which fills the same table; this file is not the place for them.
//
// Duration = (TSC of the `to` event - TSC of the `from` event) / measured TSC
// frequency. Bound = the clock-correlation error only: a kernel-stamped event was
// mapped to TSC through the correlation stream, whose points are each uncertain
// by their bracket width, so each end may be off by the widest bracket of the
// trace; [value - w, value + w] with w = widest bracket / frequency (a TSC-stamped
// pair is exact to the tick, so this over-covers it).
#pragma once
#include "analyze/latency_table.h"
#include "trace/trace_timeline.h"

namespace cptrace {

// Pairs events by tuple id (first occurrence on each side, user events only).
// Memory: one entry per tuple id seen on either channel.
LatencySeries same_node_latency(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to);

}  // namespace cptrace
