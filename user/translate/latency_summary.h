// The summary `cptrace latency` prints (text table or --json): per group of
// tuples (all, per node pair = hop, per scenario) the count, nearest-rank
// percentiles of the durations, of their bound widths, and a strict bound on
// each percentile of the true durations.
//
// Percentile p of n values is the k-th smallest, k = max(1, ceil(p * n)) (p and
// n as doubles): DuckDB's quantile_disc picks the same element, so a SQL query
// over `cptrace export table` gives the same numbers (docs/analysis-export.md).
//
// The bound of a percentile: every true duration d_i lies in [lo_i, hi_i], so
// the k-th smallest d lies between the k-th smallest lo and the k-th smallest hi
// (order statistics are monotone); those two are the percentile's bound.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/latency.h"

namespace cptrace {

// Nearest-rank percentile, p in [0, 1] (0: the minimum); reorders v. v not empty.
int64_t nearest_rank(std::vector<int64_t>& v, double p);

// Durations of one group in the summary's unit (ns, or ticks without a frequency).
struct LatencyGroup {
  std::vector<int64_t> value, lo, hi;
  void add(const LatencyRow& r, bool ns);
};

// {"count", "min", "p50", "p90", "p99", "max", "p50_lo", "p50_hi", ...,
//  "width_p50", "width_p90", "width_p99", "width_max"}.
nlohmann::json group_json(LatencyGroup g);

// The whole summary of one channel pair: from, to, unit, unmatched counts, "all",
// "hops" (per from_node/to_node) and "scenarios".
nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to);

}  // namespace cptrace
