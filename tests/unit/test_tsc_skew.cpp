// Cross-CPU TSC skew (clock/tsc_skew.h). This machine has one TSC shared by
// every CPU, so TSC_k - TSC_ref is 0: each measured interval must hold it. The
// widths are printed, not asserted: they are message delays, not the truth.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "clock/skew_watch.h"
#include "clock/tsc_skew.h"

namespace cptrace {
namespace {

TEST(TscSkew, EveryCpuIntervalHoldsZero) {
  // A generous budget: on a loaded machine a pinned thread may wait for its CPU.
  TscSkew s = measure_tsc_skew(std::chrono::milliseconds(500));
  ASSERT_GE(s.reference_cpu, 0);
  ASSERT_TRUE(s.complete()) << s.to_json().dump();
  for (const CpuSkew& c : s.cpus) {
    EXPECT_LE(c.lo, 0) << "cpu " << c.cpu;
    EXPECT_GE(c.hi, 0) << "cpu " << c.cpu;
    EXPECT_GT(c.hops, 0u);
    fmt::print("cpu {} vs cpu {}: [{}, {}] ticks, width {} ticks ({:.1f} ns), {} messages\n", c.cpu, s.reference_cpu,
               c.lo, c.hi, c.width(), s.tsc_hz > 0 ? c.width() * 1e9 / s.tsc_hz : 0.0, c.hops);
  }
  auto w = s.widest();
  ASSERT_TRUE(w);
  EXPECT_LE(w->first, 0);
  EXPECT_GE(w->second, 0);
  fmt::print("{} CPUs, widest [{}, {}] ticks, {:.1f} ms\n", s.cpus.size() + 1, w->first, w->second, s.elapsed_ms);
}

// What record and check run: the default budget. Its time is printed only.
TEST(TscSkew, DefaultBudgetHoldsZeroToo) {
  TscSkew s = measure_tsc_skew();
  for (const CpuSkew& c : s.cpus) {
    EXPECT_LE(c.lo, 0) << "cpu " << c.cpu;
    EXPECT_GE(c.hi, 0) << "cpu " << c.cpu;
  }
  fmt::print("default budget: {} CPUs measured, {} not, max |skew| bound {} ticks, {:.1f} ms\n", s.cpus.size(),
             s.unmeasured.size(), s.max_abs(), s.elapsed_ms);
}

// Recorders started together (a cluster's nodes on one machine) measure at
// once and take the CPUs from each other: each measure's retries narrow its
// interval, and every interval, however narrowed, still holds the shared 0.
// The widths are printed: how narrow they get is the host's business.
TEST(TscSkew, MeasuresAtOnceEachHoldZero) {
  constexpr int kAtOnce = 8;
  std::vector<TscSkew> got(kAtOnce);
  std::vector<std::thread> ts;
  for (int i = 0; i < kAtOnce; ++i) ts.emplace_back([&got, i] { got[i] = measure_tsc_skew(); });
  for (auto& t : ts) t.join();
  std::vector<int64_t> widths;
  for (const TscSkew& s : got)
    for (const CpuSkew& c : s.cpus) {
      EXPECT_LE(c.lo, 0) << s.to_json().dump();
      EXPECT_GE(c.hi, 0) << s.to_json().dump();
      widths.push_back(c.width());
    }
  std::sort(widths.begin(), widths.end());
  if (!widths.empty())
    fmt::print("{} measures at once: widths {}..{} ticks, median {}\n", kAtOnce, widths.front(), widths.back(),
               widths[widths.size() / 2]);
}

// A CPU not measured leaves no interval that holds for every CPU.
TEST(TscSkew, WidestNeedsEveryCpu) {
  TscSkew s;
  s.reference_cpu = 0;
  s.cpus = {{1, -30, 40, 100}, {2, 10, 90, 100}};
  auto w = s.widest();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, -30);
  EXPECT_EQ(w->second, 90);  // the reference's own 0 is inside
  EXPECT_EQ(s.max_abs(), 90);
  s.unmeasured = {3};
  EXPECT_FALSE(s.widest());
  TscSkew one;  // a machine of one CPU: nothing to measure, exactly 0
  one.reference_cpu = 0;
  ASSERT_TRUE(one.widest());
  EXPECT_EQ(*one.widest(), std::make_pair(int64_t(0), int64_t(0)));
}

// The watch on this machine: a few measures, each holding the one shared TSC's 0.
TEST(SkewWatch, MeasuresWhileItRuns) {
  SkewWatch w(std::chrono::milliseconds(30));
  // Generous: a busy host delays the measures; the test is about what they say.
  EXPECT_TRUE(w.wait_for_measures(2, std::chrono::seconds(60)));
  std::vector<TscSkew> got = w.finish();
  ASSERT_GE(got.size(), 2u);
  for (const TscSkew& s : got)
    for (const CpuSkew& c : s.cpus) {
      EXPECT_LE(c.lo, 0) << s.to_json().dump();
      EXPECT_GE(c.hi, 0) << s.to_json().dump();
    }
  EXPECT_EQ(w.finish().size(), got.size());  // stopped: no more measures
}

}  // namespace
}  // namespace cptrace
