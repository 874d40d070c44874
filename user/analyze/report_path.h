// The report's per-hop breakdown of a pipeline path (`report OUT --path
// A.out,B.in,B.out,C.in`): for each consecutive channel pair (hop) and for the
// whole path (first to last channel, the end-to-end row), the p50/p90/p99 of
// the durations and the strict bound of each percentile, computed by
// latency_summary_json() (latency/latency_summary.h) over the rows of latency() --
// exactly what `cptrace latency OUT --from X --to Y --json` prints.
//
// The end-to-end row is measured, not summed: percentiles of a sum are not the
// sum of the hops' percentiles.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "latency/latency_summary.h"
#include "tables/memory_budget.h"

namespace cptrace {

// "A,B,C" -> {A, B, C}; throws naming the option when there are fewer than two
// channels or one is empty.
std::vector<std::string> split_path(const std::string& path);

// {"channels": [...], "hops": [{from, to, unit} + the "all" group of latency --json...], "end_to_end": {...}}
// of translated trace `r`. Throws naming --path on an unknown channel, and when
// the durations exist only in ticks (reference TSC frequency unknown).
// Each hop's rows are read within `budget` (latency_stream).
nlohmann::json path_breakdown(const TraceReader& r, const std::string& path, const MemoryBudget& budget = {});

// The channel pairs of the breakdown: each hop, then first to last channel.
std::vector<ChannelPair> path_pairs(const std::string& path);
// Throws path_breakdown's error when res's durations exist only in ticks.
void check_hop_units(const LatencyResult& res);
// The breakdown from rows already read: rows[i] of path_pairs(path)[i].
nlohmann::json path_breakdown(const std::string& path, const std::vector<LatencyResult>& rows);
// One hop object of the breakdown: {from, to, unit} + the "all" group of
// `latency --json` over res's rows.
nlohmann::json path_hop(const std::string& from, const std::string& to, const LatencyResult& res);
// The same from res's rows already in columns (one read for the hop and its plots).
nlohmann::json path_hop(const std::string& from, const std::string& to, const LatencyResult& res,
                        const LatencyColumns& cols);
// {"channels", "hops", "end_to_end"} of the pairs' hop objects, end-to-end last.
nlohmann::json path_json(const std::string& path, const std::vector<nlohmann::json>& hops);

}  // namespace cptrace
