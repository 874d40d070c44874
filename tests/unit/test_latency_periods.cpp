// Latency over time: the percentiles per period and their bounds against the
// truth of synthetic series (each true duration known, its bound around it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "latency/latency_periods.h"
#include "latency/latency_table.h"
#include "tables/rank_select.h"

using namespace cptrace;

TEST(LogBins, KeysFollowTheOrderAndEdgesHoldTheValue) {
  std::mt19937_64 rng(7);
  std::vector<double> xs = {0.0,
                            -0.0,
                            1e-300,
                            -1e-300,
                            4.9e-324,
                            1e300,
                            -1e300,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            0.5,
                            1.0,
                            -1.0,
                            0.75,
                            1e-6,
                            1.0 / 3};
  std::uniform_real_distribution<double> exp10(-12, 4), unit(0, 1);
  for (int i = 0; i < 20000; ++i) xs.push_back((unit(rng) < 0.3 ? -1 : 1) * std::pow(10.0, exp10(rng)));
  std::sort(xs.begin(), xs.end());
  for (int sub : {128, 64, 16, 1}) {
    LogBins b(sub);
    for (size_t i = 0; i < xs.size(); ++i) {
      int64_t k = b.key(xs[i]);
      ASSERT_LE(b.lower(k), xs[i]) << xs[i] << " sub " << sub;
      ASSERT_GE(b.upper(k), xs[i]) << xs[i] << " sub " << sub;
      if (i) {
        ASSERT_LE(b.key(xs[i - 1]), k) << xs[i - 1] << " before " << xs[i];
      }
      if (std::isfinite(xs[i]) && std::fabs(xs[i]) > 1e-15 && std::fabs(xs[i]) < 1e15) {  // one bin: < 1/sub octave
        ASSERT_LE(b.upper(k) - b.lower(k), std::fabs(xs[i]) / sub) << xs[i];
      }
    }
  }
}

namespace {

struct Truth {
  double at, d;
};

// The nearest-rank percentile q of v (copied).
double pct(std::vector<double> v, double q) {
  size_t k = nearest_rank_index(v.size(), q);
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(k), v.end());
  return v[k];
}

// n tuples over 48 s, one period per second: period p's tuples at p + 0.5 s
// (two more at 0 and 48 s fix the span); true durations spread over decades
// around `center`, their bounds uneven around them, `value` between.
void check_against_truth(double center, double width, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> spread(0, 1.2);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<LatencySample> xs;
  std::vector<Truth> truth;
  for (int i = 0; i < 30002; ++i) {
    double at = i == 0 ? 0 : i == 1 ? 48 : double(rng() % 48) + 0.5;
    double d = center * std::exp(spread(rng)) + (at > 20 && at < 30 ? 10 * center : 0);  // a slower stretch
    double lo = d - unit(rng) * width, hi = d + unit(rng) * width;
    xs.push_back({uint64_t(i), at, lo + (hi - lo) * unit(rng), lo, hi});
    truth.push_back({at, d});
  }
  LatencySeries s;
  fill_series_stats(
      s,
      [&](const std::function<void(const LatencySample&)>& fn) {
        for (const auto& x : xs) fn(x);
      },
      MemoryBudget{});
  ASSERT_EQ(s.over_time.size(), 48u) << s.over_time.dump().substr(0, 500);
  size_t crossing_zero = 0;
  for (const auto& p : s.over_time) {
    double from = p["from_s"], to = p["to_s"];
    std::vector<double> d, lo, hi, v;
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i].at_s >= from && (xs[i].at_s < to || (to == 48 && xs[i].at_s == 48))) {
        d.push_back(truth[i].d), lo.push_back(xs[i].lo_s), hi.push_back(xs[i].hi_s), v.push_back(xs[i].value_s);
      }
    ASSERT_EQ(p["count"].get<size_t>(), d.size()) << from;
    for (const char* q : {"p50", "p90", "p99"}) {
      double f = q[1] == '5'   ? 0.5
                 : q[2] == '0' ? 0.9
                               : 0.99,
             name_lo = p[std::string(q) + "_lo_s"], name_hi = p[std::string(q) + "_hi_s"],
             est = p[std::string(q) + "_s"];
      double t = pct(d, f), plo = pct(lo, f), phi = pct(hi, f);
      EXPECT_LE(name_lo, t) << q << " at " << from << ": the true percentile is below its bound";
      EXPECT_GE(name_hi, t) << q << " at " << from << ": the true percentile is above its bound";
      EXPECT_LE(name_lo, plo);  // outward, and by at most one bin
      EXPECT_GE(name_lo, plo - std::fabs(plo) / 64);
      EXPECT_GE(name_hi, phi);
      EXPECT_LE(name_hi, phi + std::fabs(phi) / 64);
      EXPECT_LE(name_lo, est);
      EXPECT_GE(name_hi, est);
      EXPECT_NEAR(est, pct(v, f), std::fabs(pct(v, f)) / 64 + 1e-15);
      crossing_zero += name_lo < 0;
    }
    EXPECT_EQ(p["max_s"].get<double>(), *std::max_element(v.begin(), v.end()));
    EXPECT_EQ(p["max_lo_s"].get<double>(), *std::max_element(lo.begin(), lo.end()));
    EXPECT_EQ(p["max_hi_s"].get<double>(), *std::max_element(hi.begin(), hi.end()));
    EXPECT_LE(p["max_lo_s"].get<double>(), *std::max_element(d.begin(), d.end()));
    EXPECT_GE(p["max_hi_s"].get<double>(), *std::max_element(d.begin(), d.end()));
  }
  if (width > center) {
    EXPECT_GT(crossing_zero, 0u) << "the case meant to reach below zero did not";
  }
  // The slower stretch shows: its p50 above the first period's.
  EXPECT_GT(s.over_time[25]["p50_lo_s"].get<double>(), s.over_time[0]["p50_hi_s"].get<double>());
}

}  // namespace

TEST(LatencyPeriods, EveryPercentileBandHoldsTheTruth) { check_against_truth(50e-6, 3e-6, 1); }

TEST(LatencyPeriods, BoundsReachingBelowZeroHoldTheTruth) { check_against_truth(2e-6, 9e-6, 2); }

TEST(LatencyPeriods, OneInstantIsOnePeriod) {
  LatencySeries s;
  fill_series_stats(
      s,
      [&](const std::function<void(const LatencySample&)>& fn) {
        for (int i = 0; i < 10; ++i) fn({uint64_t(i), 3.0, 1e-3 * (i + 1), 1e-3 * i, 1e-3 * (i + 2)});
      },
      MemoryBudget{});
  ASSERT_EQ(s.over_time.size(), 1u) << s.over_time.dump();
  EXPECT_EQ(s.over_time[0]["count"], 10);
  EXPECT_LE(s.over_time[0]["p50_lo_s"].get<double>(), 4e-3);  // true p50 of 1..10 ms widened by 1 ms each way
  EXPECT_GE(s.over_time[0]["p50_hi_s"].get<double>(), 6e-3);
}
