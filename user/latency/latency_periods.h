// Latency over time: a series' durations cut into equal periods of the `from`
// event's time, and per period the percentiles people watch (p50, p90, p99,
// max), each with a strict bound.
//
// The bound: every tuple's true duration d_i lies in [lo_i, hi_i], and a
// nearest-rank percentile only grows when any value grows, so the period's true
// p-th percentile lies in [p-th percentile of the lo_i, p-th percentile of the
// hi_i]. Those two are read from histograms of 1/kSub-octave bins (signed, so a
// bound reaching below zero is kept) taken outward: the bin's lower edge for the
// lo side, its upper edge for the hi side. The band is strict and at most one
// bin (< 1 % of the value) wider than the exact one; the estimate is its bin's
// middle, which lies inside the band. max is exact (the largest value, lo, hi).
// Memory: periods x 3 histograms of at most kMaxBins counts, whatever the rows.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/latency_table.h"

namespace cptrace {

// Ordered, signed log-scale bins of doubles: key(x) <= key(y) when x <= y, and
// every x with key(x) == k lies in [lower(k), upper(k)].
class LogBins {
 public:
  explicit LogBins(int sub_per_octave) : sub_(sub_per_octave) {}
  int64_t key(double x) const;
  double lower(int64_t k) const;
  double upper(int64_t k) const;
  int sub() const { return sub_; }

 private:
  double mag_lower(int64_t idx) const;
  double mag_upper(int64_t idx) const;
  int sub_;
};

class LatencyPeriods {
 public:
  static constexpr size_t kPeriods = 48;
  static constexpr int kSub = 128;  // bins per octave at best (0.54 % wide)
  static constexpr int64_t kMaxBins = 8192;  // fewer per octave when the range is wider
  // [t0, t1]: the series' from-instants; [lo_min, hi_max]: the widest its bounds reach.
  LatencyPeriods(double t0, double t1, double lo_min, double hi_max);
  void add(const LatencySample& x);
  // [{from_s, to_s, count, p50_s, p50_lo_s, p50_hi_s, ..., max_s, max_lo_s, max_hi_s}]
  // for every period holding a sample, in time order.
  nlohmann::json to_json() const;

 private:
  struct Period {
    uint64_t n = 0;
    std::vector<uint32_t> value, lo, hi;  // counts per bin, from kmin_
    double vmax = 0, lomax = 0, himax = 0;
  };
  size_t period_of(double at_s) const;
  size_t bin_of(double x) const;
  // The bin holding 0-based rank k of a histogram.
  size_t rank_bin(const std::vector<uint32_t>& h, uint64_t k) const;
  double t0_, step_;
  LogBins bins_;
  int64_t kmin_ = 0, kmax_ = 0;
  std::vector<Period> periods_;
};

}  // namespace cptrace
