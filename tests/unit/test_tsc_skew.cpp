// Cross-CPU TSC skew (record/tsc_skew.h). This machine has one TSC shared by
// every CPU, so TSC_k - TSC_ref is 0: each measured interval must hold it. The
// widths are printed, not asserted: they are message delays, not the truth.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <thread>
#include <vector>

#include "record/skew_watch.h"
#include "record/tsc_skew.h"
#include "trace/trace_reader.h"
#include "trace/tsc_skew_history.h"

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

// meta.json "tsc" as the recorder writes it, from measures of CPU 1 (and 2).
nlohmann::json skew_meta(const std::vector<TscSkew>& periodic, std::vector<CpuSkew> start, std::vector<CpuSkew> stop) {
  auto measure = [](std::vector<CpuSkew> cpus) {
    TscSkew s;
    s.reference_cpu = 0;
    s.cpus = std::move(cpus);
    return s;
  };
  TscSkew a = measure(start), b = measure(stop);
  auto iv = [](const TscSkew& s) { return nlohmann::json::array({s.widest()->first, s.widest()->second}); };
  nlohmann::json t = {
      {"skew_ticks", {{"at_start", iv(a)}, {"at_stop", iv(b)}}},
      {"skew", {{"at_start", a.to_json()}, {"at_stop", b.to_json()}, {"periodic", nlohmann::json::array()}}}};
  for (const TscSkew& p : periodic) t["skew"]["periodic"].push_back(p.to_json());
  return {{"tsc", t}};
}

TscSkew one_cpu(int cpu, int64_t lo, int64_t hi) {
  TscSkew s;
  s.reference_cpu = 0;
  s.cpus = {{cpu, lo, hi, 10}};
  return s;
}

// One constant skew: every periodic interval holds it, whatever its width, so
// none widens the half-width the start and stop intervals give.
TEST(TscSkewHistory, IntervalsThatMeetTheEndsChangeNothing) {
  auto meta = skew_meta({one_cpu(1, -500, 700), one_cpu(1, -40000, 40000), one_cpu(1, 100, 200)}, {{1, -300, 250, 10}},
                        {{1, -200, 400, 10}});
  TscSkewHistory h = TscSkewHistory::from_meta(meta);
  EXPECT_EQ(h.periodic, 3u);
  EXPECT_EQ(h.moved, 0u);
  EXPECT_EQ(h.err, 400u);  // as before the watch: the widest end
  EXPECT_EQ(h.ends.at(1), std::make_pair(int64_t(-300), int64_t(400)));
}

// A CPU whose TSC ran away from the reference between start and stop and came
// back (one that stopped in deep idle, then was resynchronised): its interval
// while recording lies outside both ends. Counted, and every stamp then carries
// a half-width that holds it.
TEST(TscSkewHistory, AnIntervalOutsideTheEndsIsCountedAndHeld) {
  auto meta = skew_meta({one_cpu(1, -100, 100), one_cpu(1, 5000, 6200), one_cpu(2, -9000, -8000)},
                        {{1, -300, 250, 10}, {2, -50, 60, 10}}, {{1, -200, 400, 10}, {2, -70, 20, 10}});
  TscSkewHistory h = TscSkewHistory::from_meta(meta);
  EXPECT_EQ(h.moved, 2u);
  EXPECT_EQ(h.err, 9000u);
  EXPECT_EQ(tsc_skew_err_of(meta), 9000u);  // what every reader of the trace carries
  // Before the watch (no periodic measures): the ends alone, as before.
  meta["tsc"]["skew"].erase("periodic");
  EXPECT_EQ(TscSkewHistory::from_meta(meta).err, 400u);
  EXPECT_FALSE(TscSkewHistory::from_meta(meta).watched());
}

// The watch on this machine: a few measures, each holding the one shared TSC's 0.
TEST(SkewWatch, MeasuresWhileItRuns) {
  SkewWatch w(std::chrono::milliseconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
