// The latency table: durations between two channels per tuple id, each with a
// strict bound. This is the ONE interface through which durations reach the
// report (report_html.h); whoever computes them fills it:
//   - same_node_latency() (local_latency.h) for two channels of one node's trace;
//   - translated_latency_series() (report_latency.h) for a translated trace:
//     the rows of `cptrace latency` (latency.h), one series per node pair
//     (remote = different nodes), with the scenario(s) that bounded them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

// One tuple's duration from its event on `from` to its event on `to`.
struct LatencySample {
  uint64_t tuple = 0;
  double at_s = 0;     // when the `from` event happened, s since the (reference) trace start
  double value_s = 0;  // the estimate
  double lo_s = 0;     // strict bound: the true duration lies in [lo_s, hi_s]
  double hi_s = 0;
};

// All durations of one channel pair.
struct LatencySeries {
  std::string from_channel, to_channel;
  std::string from_node, to_node;
  bool remote = false;     // different nodes: the bound comes from translation
  std::string method;      // what produced value and bound (shown in the report)
  std::vector<LatencySample> samples;
  uint64_t unmatched_from = 0;  // tuple ids seen on `from` only
  uint64_t unmatched_to = 0;    // ... on `to` only
  uint64_t duplicates = 0;      // repeated tuple ids on one side (first occurrence used)
};

// Order statistics of a series (nearest-rank percentiles), in seconds.
struct LatencySummary {
  uint64_t count = 0;
  double min = 0, p25 = 0, p50 = 0, p75 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  double lo_min = 0, hi_max = 0;                          // the widest the bounds reach
  double width_p50 = 0, width_max = 0;                    // hi - lo
};

LatencySummary summarize(const LatencySeries& s);
// Nearest-rank percentile of sorted values, q in [0, 1]; 0 for an empty vector.
double percentile_sorted(const std::vector<double>& sorted, double q);
nlohmann::json summary_json(const LatencySummary& s);

}  // namespace cptrace
