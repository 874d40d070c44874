// The report's latency table (latency_table.h) from either kind of trace:
//   - a translated trace (meta.json "translated"): the rows of `cptrace latency`
//     (latency.h, the same computation), one LatencySeries per node pair the
//     channel pair spans, so bound width over time is drawn per node pair;
//   - a single node's trace: same_node_latency() (local_latency.h), the only
//     source of bounds there is (no translation, one clock).
#pragma once
#include <string>
#include <vector>

#include "analyze/latency_table.h"
#include "trace/trace_reader.h"

namespace cptrace {

bool is_translated(const TraceReader& r);

// Durations from channel `from` to `to` of a translated trace, in seconds (the
// ns values and bounds of `cptrace latency`), split by (from node, to node).
// Throws std::runtime_error when the reference TSC frequency is unknown (the
// bounds would only exist in ticks) or a channel is unknown.
// The rows are read within `budget` (latency_stream, fill_series_stats).
std::vector<LatencySeries> translated_latency_series(const TraceReader& r, const std::string& from,
                                                     const std::string& to, const MemoryBudget& budget = {});

}  // namespace cptrace
