// The skew across CPUs a recording measured, as readers carry it
// (trace/tsc_skew_history.h), from meta.json as the recorder writes it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <vector>

#include "clock/tsc_skew.h"
#include "trace/trace_reader.h"
#include "trace/tsc_skew_history.h"

namespace cptrace {
namespace {

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
  EXPECT_EQ(TraceReader::from_bytes(file_header_bytes(), meta).tsc_skew_err(), 9000u);  // what a reader carries
  // Before the watch (no periodic measures): the ends alone, as before.
  meta["tsc"]["skew"].erase("periodic");
  EXPECT_EQ(TscSkewHistory::from_meta(meta).err, 400u);
  EXPECT_FALSE(TscSkewHistory::from_meta(meta).watched());
}

// A stamp that names its CPU carries that CPU's interval only: none on the
// reference CPU, CPU 1's on CPU 1 (and CPU 2's, moved while recording, on 2).
// A CPU never measured, or measures against different reference CPUs, keep the
// widest for every stamp.
TEST(TscSkewHistory, AStampOnAKnownCpuCarriesThatCpusIntervalOnly) {
  auto meta = skew_meta({one_cpu(2, -9000, -8000)}, {{1, -300, 250, 10}, {2, -50, 60, 10}},
                        {{1, -200, 400, 10}, {2, -70, 20, 10}});
  TscSkewHistory h = TscSkewHistory::from_meta(meta);
  EXPECT_EQ(h.err, 9000u);
  EXPECT_EQ(h.err_on(0), 0u) << "the reference CPU's own TSC";
  EXPECT_EQ(h.err_on(1), 400u);
  EXPECT_EQ(h.err_on(2), 9000u) << "its move is its own";
  EXPECT_EQ(h.err_on(3), 9000u) << "never measured";
  meta["tsc"]["skew"]["at_stop"]["reference_cpu"] = 1;
  TscSkewHistory mixed = TscSkewHistory::from_meta(meta);
  for (int cpu : {0, 1, 2}) EXPECT_EQ(mixed.err_on(cpu), 9000u) << cpu;
  meta["tsc"]["skew"].erase("at_stop");
  meta["tsc"]["skew"]["at_start"].erase("reference_cpu");
  EXPECT_EQ(TscSkewHistory::from_meta(meta).err_on(0), 9000u) << "no reference named";
}

// While recording (and in a killed recorder's trace) the stop's measure is
// null: the start's alone says where each CPU is, as it alone gives the widest.
TEST(TscSkewHistory, AMeasureNotTakenLeavesTheOthersPerCpu) {
  auto meta = skew_meta({}, {{1, -100, 90, 10}, {2, -900, 850, 10}}, {{1, -80, 60, 10}, {2, -700, 800, 10}});
  meta["tsc"]["skew_ticks"]["at_stop"] = nullptr;
  meta["tsc"]["skew"]["at_stop"] = nullptr;
  TscSkewHistory h = TscSkewHistory::from_meta(meta);
  EXPECT_EQ(h.err, 900u);
  ASSERT_TRUE(h.reference_cpu.has_value());
  EXPECT_EQ(h.err_on(0), 0u);
  EXPECT_EQ(h.err_on(1), 100u) << "CPU 1's own start interval, not the widest";
  EXPECT_EQ(h.err_on(2), 900u);
  meta["tsc"]["skew"].erase("at_stop");  // absent, as null
  EXPECT_EQ(TscSkewHistory::from_meta(meta).err_on(1), 100u);
  meta["tsc"]["skew"]["at_stop"] = {{"cpus", nlohmann::json::array()}};  // taken, naming no reference
  EXPECT_EQ(TscSkewHistory::from_meta(meta).err_on(1), 900u);
}

}  // namespace
}  // namespace cptrace
