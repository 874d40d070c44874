// The report's latency table (latency_table.h) from the rows of `cptrace
// latency` (latency_source.h: the same computation, so the page and the command
// agree): one LatencySeries per node pair the channel pair spans, so bound width
// over time is drawn per node pair; one node's own trace gives one series (the
// node to itself).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "latency/latency_table.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "latency/latency_source.h"

namespace cptrace {

// Throws latency_series' error when res's durations exist only in ticks.
void check_series_units(const TraceReader& r, const LatencyResult& res);

// Durations from channel `from` to `to`, in seconds (the ns values and bounds of
// `cptrace latency`), split by (from node, to node).
// Throws std::runtime_error when the reference TSC frequency is unknown (the
// bounds would only exist in ticks) or a channel is unknown.
// The rows are read within `budget` (latency_stream, fill_series_stats).
std::vector<LatencySeries> latency_series(const TraceReader& r, const std::string& from, const std::string& to,
                                          const MemoryBudget& budget = {});
// The same from rows already read (latency_rows, latency_streams): two reads of
// them for all the node pairs' series; `also`, when given, is handed each row
// of the first (one read for the series and another summary of the rows).
std::vector<LatencySeries> latency_series(const TraceReader& r, const std::string& from, const std::string& to,
                                          const LatencyResult& res, const MemoryBudget& budget,
                                          const std::function<void(const LatencyRow&)>& also = {});

}  // namespace cptrace
