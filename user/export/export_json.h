// `cptrace export json`: Chrome / Perfetto trace-event JSON ("JSON Object
// Format"), streamed frame by frame. Every event is an instant event ("ph":"i",
// thread scope) named after its channel ("close:<channel>" for a channel close),
// pid/tid as recorded, ts in microseconds since the trace start (ns resolution).
// args carry the exact values: tuple and tsc as decimal strings (JSON numbers
// lose precision above 2^53), channel_id as hex, cpu.
// A `counter` handler's series point (one CPU's count of a channel over one
// period) is a complete event instead ("ph":"X", "cat":"counter_period", named
// after its channel, ts = period start, dur = the period from the handler
// history) on pid 0, tid = its CPU; args: count, period_ns, tsc, channel_id, cpu.
#pragma once
#include <string>

#include "trace/trace_timeline.h"

namespace cptrace {

uint64_t export_json(const TraceReader& r, const Timeline& tl, const std::string& out);

}  // namespace cptrace
