// `cptrace export csv`: every event as one CSV row, streamed frame by frame.
//   node,kind,ts,time_ns,channel,channel_id,tuple,pid,tid,cpu
// ts: the node's TSC ticks (as `cptrace dump --csv`); time_ns: nanoseconds since
// the trace start at the measured TSC frequency; channel_id: 0x-prefixed hex.
#pragma once
#include <string>

#include "trace/trace_timeline.h"

namespace cptrace {

// Returns the number of events written.
uint64_t export_csv(const TraceReader& r, const Timeline& tl, const std::string& out);

}  // namespace cptrace
