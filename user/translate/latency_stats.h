// Percentiles of a channel pair's latency rows (latency.h) with a strict bound on
// each percentile: `cptrace latency --json` prints them and the report's per-hop
// table (--path) shows them, so both come from this one function.
//
// The bound of a percentile: every tuple's true duration x_i lies in [lo_i, hi_i],
// so the k-th smallest true duration lies between the k-th smallest lo and the
// k-th smallest hi (each x_(k) >= k of the lo values and <= n-k+1 of the hi
// values). It is strict, and narrower than [min lo, max hi].
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "translate/latency.h"

namespace cptrace {

struct Percentiles {
  int64_t min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // nearest rank
};

struct LatencyStats {
  std::string from, to;
  std::string unit;       // "ns", or "ticks" when the reference frequency is unknown
  uint64_t count = 0;     // matched tuples
  Percentiles value;      // the estimates
  Percentiles lo, hi;     // percentiles of the lower and upper bounds: bound of each percentile
  Percentiles width;      // of hi - lo per tuple
  uint64_t from_only = 0, to_only = 0, duplicates = 0;
};

LatencyStats latency_stats(const LatencyResult& res, const std::string& from, const std::string& to);
nlohmann::json latency_stats_json(const LatencyStats& s);

}  // namespace cptrace
