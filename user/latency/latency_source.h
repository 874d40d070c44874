// Where the rows of `latency` and the report come from, decided once, here:
//   - a translated trace (meta.json "translated"): latency_stream() (latency.h);
//   - one node's own trace: node_latency_stream() (local_latency.h): one node
//     needs no translation, so its rows come straight from the trace.
#pragma once
#include <memory>
#include <string>

#include "latency/latency.h"
#include "tables/memory_budget.h"
#include "trace/trace_reader.h"

namespace cptrace {

bool is_translated(const TraceReader& r);

// The rows of `cptrace latency` for either kind of trace.
LatencyResult latency_rows(const TraceReader& r, const std::string& from, const std::string& to,
                           const MemoryBudget& budget);

// Opens DIR for `latency` / `report`: one node's trace or a translated one. A
// directory holding several nodes' traces (not translated) is refused with the
// "run cptrace translate first" error naming them.
std::unique_ptr<TraceReader> open_latency_trace(const std::string& dir);

}  // namespace cptrace
