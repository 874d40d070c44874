// The report's per-hop breakdown of a pipeline path (`report OUT --path
// A.out,B.in,B.out,C.in`): for each consecutive channel pair (hop) and for the
// whole path (first to last channel, the end-to-end row), the p50/p90/p99 of
// the durations and the strict bound of each percentile, computed by
// latency_summary_json() (translate/latency_summary.h) over the rows of latency() --
// exactly what `cptrace latency OUT --from X --to Y --json` prints.
//
// The end-to-end row is measured, not summed: percentiles of a sum are not the
// sum of the hops' percentiles.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_reader.h"
#include "translate/memory_budget.h"

namespace cptrace {

// "A,B,C" -> {A, B, C}; throws naming the option when there are fewer than two
// channels or one is empty.
std::vector<std::string> split_path(const std::string& path);

// {"channels": [...], "hops": [{from, to, unit} + the "all" group of latency --json...], "end_to_end": {...}}
// of translated trace `r`. Throws naming --path on an unknown channel, and when
// the durations exist only in ticks (reference TSC frequency unknown).
// Each hop's rows are read within `budget` (latency_stream).
nlohmann::json path_breakdown(const TraceReader& r, const std::string& path, const MemoryBudget& budget = {});

}  // namespace cptrace
