// The latency table: durations between two channels per tuple id, each with a
// strict bound. This is the ONE interface through which durations reach the
// report (report_html.h); whoever computes them fills it:
//   - latency_series() (latency_series.h): the rows of `cptrace latency`, of a
//     translated trace (latency.h) or of one node's own (local_latency.h), one
//     series per node pair (remote = different nodes), with the scenario(s)
//     that bounded them;
//   - same_node_latency() (local_latency.h): the same pairing of one node's
//     trace, straight into a series.
//
// A series does not hold its samples: fill_series_stats() reads them (twice)
// from whoever has them and keeps the summary and the plots' data, so a series
// of any length costs the budget it is given (rank_select.h), no more.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/percentiles.h"
#include "tables/memory_budget.h"
#include "tables/rank_select.h"

namespace cptrace {

// One tuple's duration from its event on `from` to its event on `to`.
struct LatencySample {
  uint64_t tuple = 0;
  double at_s = 0;  // when the `from` event happened, s since the (reference) trace start
  double value_s = 0;  // the estimate
  double lo_s = 0;  // strict bound: the true duration lies in [lo_s, hi_s]
  double hi_s = 0;
};

// Order statistics of a series (nearest-rank percentiles: min .. max), in seconds.
struct LatencySummary : Percentiles<double> {
  uint64_t count = 0;
  double mean = 0;
  double lo_min = 0, hi_max = 0;  // the widest the bounds reach
  double width_p50 = 0, width_max = 0;  // hi - lo
};

// The durations of one channel pair, as the report draws them.
struct LatencySeries {
  std::string from_channel, to_channel;
  std::string from_node, to_node;
  bool remote = false;  // different nodes: the bound comes from translation
  std::string method;  // what produced value and bound (shown in the report)
  uint64_t unmatched_from = 0;  // tuple ids seen on `from` only
  uint64_t unmatched_to = 0;  // ... on `to` only
  uint64_t duplicates = 0;  // repeated tuple ids on one side (first occurrence used)
  LatencySummary summary;
  nlohmann::json histogram;  // 40 bins over [min, max] of the values; null without samples
  nlohmann::json cdf = nlohmann::json::array();  // cdf_points() of the values
  nlohmann::json width_over_time = nlohmann::json::array();  // [at_s, widest bound] per time slice
  nlohmann::json over_time = nlohmann::json::array();  // percentiles per period with bounds (latency_periods.h)
};

// scan(fn): fn(sample) for every sample of the series, in the same order on
// every call (fill_series_stats calls it twice).
using SampleScan = std::function<void(const std::function<void(const LatencySample&)>&)>;
// Fills s.summary, histogram, cdf, width_over_time and over_time within `budget`. The mean
// sums the values in scan order.
void fill_series_stats(LatencySeries& s, const SampleScan& scan, const MemoryBudget& budget);

// fill_series_stats for several series whose samples come mixed in the same
// rows: the rows are read twice in all, not twice per series. add(i, x) during
// the first read, for each sample x of series i (series numbered from 0 as they
// come); finish(out, scan) fills *out[i] from series i, scan(fn) calling fn(i,
// x) for the same samples in the same order. One pool of the budget's share
// holds every series' columns; each selection has fill_series_stats's share.
class SeriesFiller {
 public:
  using MultiScan = std::function<void(const std::function<void(size_t, const LatencySample&)>&)>;
  explicit SeriesFiller(const MemoryBudget& budget);
  ~SeriesFiller();
  void add(size_t series, const LatencySample& x);
  void finish(const std::vector<LatencySeries*>& out, const MultiScan& scan);

 private:
  struct Series;
  MemoryPool pool_;
  uint64_t select_bytes_;
  std::string dir_;
  std::vector<std::unique_ptr<Series>> series_;
};

// Nearest-rank percentile of sorted values, q in [0, 1]; 0 for an empty vector.
double percentile_sorted(const std::vector<double>& sorted, double q);
// The CDF points of n sorted values: at most `points` + 1 (value, fraction <=
// value) pairs at evenly spaced ranks, always with the first and last value;
// value_at(rank) gives the value of a 0-based rank.
nlohmann::json cdf_points(uint64_t n, const std::function<double(uint64_t)>& value_at, size_t points = 400);
nlohmann::json summary_json(const LatencySummary& s);

}  // namespace cptrace
