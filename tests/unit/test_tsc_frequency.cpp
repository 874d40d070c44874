// The TSC frequency for seconds (clock/tsc_frequency.h): against
// CLOCK_MONOTONIC_RAW, strict for the brackets and the reading quantum, whatever
// NTP did to CLOCK_MONOTONIC.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "clock/tsc_frequency.h"

namespace cptrace {
namespace {

constexpr long double kHz = 2.096003e9L;  // the physical TSC against RAW

// A point at true (RAW) instant t ns: MONOTONIC runs `mono_ppm` fast, readings
// truncated to `quantum` ns, TSC brackets `width` ticks wide around the truth.
ClockPoint point(long double t, long double mono_ppm, uint64_t quantum = 1, uint32_t width = 40, bool raw = true) {
  auto q = [&](long double ns) { return uint64_t(std::floor(ns / quantum)) * quantum; };
  ClockPoint p;
  // The TSC at which each clock showed its (truncated) reading lies inside the
  // bracket; the midpoint is off by up to half the width.
  p.mono_ns = q(t * (1 + mono_ppm * 1e-6L));
  p.tsc = uint64_t(t * kHz / 1e9L) + width / 3;
  p.width_ticks = width;
  if (raw) {
    p.flags |= kClockHasRaw;
    p.raw_ns = q(t);
    p.raw_tsc = uint64_t(t * kHz / 1e9L) - width / 3;
    p.raw_width_ticks = width;
  }
  return p;
}

TEST(TscFrequency, AgainstRawNotTheSlewedMonotonic) {
  ClockPoint a = point(1e9L, 628), b = point(5e9L, 628);
  auto f = tsc_frequency(a, b);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->raw);
  EXPECT_STREQ(f->clock(), "CLOCK_MONOTONIC_RAW");
  EXPECT_LE(f->lo, kHz);
  EXPECT_GE(f->hi, kHz);
  EXPECT_LT((f->hi - f->lo) / kHz, 1e-7) << "a 4 s span pins the frequency to well under 1 ppm";
  // What MONOTONIC would have said: 628 ppm low, far outside the interval.
  EXPECT_LT(kHz / (1 + 628e-6L), f->lo);
}

TEST(TscFrequency, WithoutRawFallsBackToMonotonicAndSaysSo) {
  ClockPoint a = point(1e9L, 0, 1, 40, false), b = point(5e9L, 0, 1, 40, false);
  auto f = tsc_frequency(a, b);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->raw);
  EXPECT_STREQ(f->clock(), "CLOCK_MONOTONIC");
  EXPECT_LE(f->lo, kHz);
  EXPECT_GE(f->hi, kHz);
}

// A coarse clocksource (Hyper-V's 100 ns, acpi_pm's 279 ns) reads in steps: with
// its quantum the interval holds the truth over a short span; a 1 ns quantum
// assumed for it does not.
TEST(TscFrequency, ReadingQuantumWidensTheInterval) {
  ClockPoint a = point(1e9L + 99, 0, 100, 2), b = point(1e9L + 2e6L, 0, 100, 2);  // 2 ms apart
  auto coarse = tsc_frequency(a, b, 100);
  ASSERT_TRUE(coarse);
  EXPECT_LE(coarse->lo, kHz);
  EXPECT_GE(coarse->hi, kHz);
  auto assumed_fine = tsc_frequency(a, b, 1);
  ASSERT_TRUE(assumed_fine);
  EXPECT_FALSE(assumed_fine->lo <= kHz && kHz <= assumed_fine->hi);
}

TEST(TscFrequency, PointsThatDoNotAdvanceGiveNone) {
  ClockPoint a = point(1e9L, 0);
  EXPECT_FALSE(tsc_frequency(a, a));
  EXPECT_FALSE(tsc_frequency(point(2e9L, 0), a));
}

// A stream whose TSC ran 300 ppm faster from 4.05 s on (raw_witness.h found the
// change in segment 3): within one side the two points' interval; across it
// the interval holds both sides' rates; a side of one point has no rate.
TEST(TscFrequency, AcrossARateChangeHoldsBothRates) {
  std::vector<ClockPoint> pts;
  for (int k = 0; k <= 6; ++k) {
    ClockPoint p = point((k + 1) * 1e9L, 0);
    if (k >= 4) p.raw_tsc += uint64_t((k + 1 - 4.05L) * kHz * 300e-6L);
    pts.push_back(p);
  }
  const long double before = kHz, after = kHz * (1 + 300e-6L);
  auto one = tsc_frequency(pts, 0, 3, {3});
  ASSERT_TRUE(one);
  EXPECT_LE(one->lo, before);
  EXPECT_GE(one->hi, before);
  EXPECT_LT(one->hi, after) << "no change in the stretch: not widened";
  for (auto [i, j] : {std::pair<size_t, size_t>{0, 6}, {2, 5}, {3, 4}}) {
    auto f = tsc_frequency(pts, i, j, {3});
    ASSERT_TRUE(f);
    EXPECT_LE(f->lo, before);
    EXPECT_GE(f->hi, after);
    EXPECT_TRUE(f->lo <= f->hz && f->hz <= f->hi);
  }
  // What one frequency over the whole run says: a rate between the two, wrong
  // for either side by more than its interval.
  auto whole = tsc_frequency(pts.front(), pts.back());
  ASSERT_TRUE(whole);
  EXPECT_GT(whole->lo, before);
  EXPECT_LT(whole->hi, after);
  EXPECT_FALSE(tsc_frequency(pts, 0, 6, {0}));  // the rate before a change in the first segment: unmeasured
  EXPECT_FALSE(tsc_frequency(pts, 0, 6, {2, 3}));  // nor between two changes in neighbouring segments
  EXPECT_TRUE(tsc_frequency(pts, 4, 6, {0}));
}

}  // namespace
}  // namespace cptrace
