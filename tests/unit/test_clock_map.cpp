// ClockMap: interpolation, extrapolation, monotonicity, overflow safety; and the
// sanity of real correlation points.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "clock/clock_map.h"

namespace cptrace {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kTsc0 = 1'000'000'000'000'000ull;  // ~1e15: days of uptime at GHz
constexpr uint64_t kMono0 = 500'000'000'000'000ull;

// tsc = kTsc0 + 2.9 * (mono - kMono0), exactly, at multiples of 10 ns.
uint64_t linear_tsc(uint64_t mono) { return kTsc0 + (mono - kMono0) * 29 / 10; }

ClockMap linear_map(int points, uint64_t step_ns) {
  std::vector<ClockPoint> pts;
  for (int i = 0; i < points; ++i) {
    uint64_t m = kMono0 + i * step_ns;
    pts.push_back({linear_tsc(m), m, 10, 0});
  }
  return ClockMap(pts);
}

TEST(ClockMap, LinearInterpolationAndExtrapolation) {
  ClockMap m = linear_map(10, 100'000'000);  // 100 ms apart
  for (uint64_t d : {0ull, 10ull, 123'456'780ull, 899'999'990ull, 900'000'000ull}) {
    EXPECT_EQ(m.mono_to_tsc(kMono0 + d), linear_tsc(kMono0 + d)) << d;
    EXPECT_EQ(m.tsc_to_mono(linear_tsc(kMono0 + d)), kMono0 + d) << d;
  }
  // beyond both ends, over hours
  const uint64_t hours = 5ull * 3600 * 1'000'000'000;
  EXPECT_EQ(m.mono_to_tsc(kMono0 + hours), linear_tsc(kMono0 + hours));
  EXPECT_EQ(m.mono_to_tsc(kMono0 - hours), kTsc0 - hours * 29 / 10);
  EXPECT_EQ(m.tsc_to_mono(kTsc0 - hours * 29 / 10), kMono0 - hours);
  EXPECT_DOUBLE_EQ(m.tsc_hz(), 2.9e9);
}

TEST(ClockMap, SaturatesInsteadOfWrapping) {
  ClockMap m = linear_map(3, 1'000'000);
  EXPECT_EQ(m.mono_to_tsc(0), 0u);
  EXPECT_EQ(m.mono_to_tsc(kMax64), kMax64);
  EXPECT_EQ(m.tsc_to_mono(0), kMono0 - (kTsc0 * 10 + 14) / 29);  // 1e15 ticks back is still > 0 ns
  EXPECT_EQ(ClockMap({{kTsc0, 10, 0, 0}, {kTsc0 + 100, 20, 0, 0}}).tsc_to_mono(0), 0u);
  // slope 10/29 ns per tick from the last point, rounded; no wrap in between
  const ClockPoint& last = m.points().back();
  using u128 = unsigned __int128;
  uint64_t want = last.mono_ns + static_cast<uint64_t>(((u128)(kMax64 - last.tsc) * 10 + 14) / 29);
  EXPECT_EQ(m.tsc_to_mono(kMax64), want);
}

TEST(ClockMap, PiecewiseSegments) {
  // 3 ticks/ns for the first second, then 2 ticks/ns.
  ClockMap m({{1'000, 0, 0, 0}, {3'000'001'000, 1'000'000'000, 0, 0}, {5'000'001'000, 2'000'000'000, 0, 0}});
  EXPECT_EQ(m.mono_to_tsc(500'000'000), 1'500'001'000u);
  EXPECT_EQ(m.mono_to_tsc(1'500'000'000), 4'000'001'000u);
  EXPECT_EQ(m.mono_to_tsc(3'000'000'000), 7'000'001'000u);  // end slope continues
  EXPECT_EQ(m.tsc_to_mono(4'000'001'000), 1'500'000'000u);
  EXPECT_EQ(m.tsc_to_mono(1'000 - 3), 0u);  // -1 ns before the first point: saturated at 0
  EXPECT_NEAR(m.tsc_hz(), 2.5e9, 0.01e9);  // least squares over both segments
}

TEST(ClockMap, RoundsToNearest) {
  ClockMap m({{0, 0, 0, 0}, {10, 3, 0, 0}});
  EXPECT_EQ(m.mono_to_tsc(1), 3u);  // 3.33
  EXPECT_EQ(m.mono_to_tsc(2), 7u);  // 6.67
  EXPECT_EQ(m.tsc_to_mono(5), 2u);  // 1.5 rounds up
}

TEST(ClockMap, MonotonicOverNoisyPoints) {
  std::mt19937_64 rng(1);
  std::vector<ClockPoint> pts;
  uint64_t m = kMono0, t = kTsc0;
  for (int i = 0; i < 200; ++i) {
    m += 100'000'000 + rng() % 1000;
    t += 290'000'000 + rng() % 5000;
    pts.push_back({t, m, 30, 0});
  }
  ClockMap map(pts);
  uint64_t prev_t = 0, prev_m = 0;
  for (uint64_t x = kMono0 - 1'000'000'000; x < m + 1'000'000'000; x += 999'983) {
    uint64_t y = map.mono_to_tsc(x);
    EXPECT_GE(y, prev_t);
    prev_t = y;
  }
  for (uint64_t x = kTsc0 - 3'000'000'000; x < t + 3'000'000'000; x += 2'999'999) {
    uint64_t y = map.tsc_to_mono(x);
    EXPECT_GE(y, prev_m);
    prev_m = y;
  }
  // exact at every point, and next to it
  for (const ClockPoint& p : pts) {
    EXPECT_EQ(map.mono_to_tsc(p.mono_ns), p.tsc);
    EXPECT_LE(map.mono_to_tsc(p.mono_ns - 1), p.tsc);
    EXPECT_GE(map.mono_to_tsc(p.mono_ns + 1), p.tsc);
  }
}

TEST(ClockMap, SortsAndDropsContradictingPoints) {
  ClockMap m({{3000, 300, 0, 0},
              {1000, 100, 0, 0},
              {2000, 200, 0, 0},
              {2000, 200, 0, 0},  // duplicate
              {2500, 150, 0, 0},  // mono goes back
              {2600, 200, 0, 0}});  // mono stands still
  ASSERT_EQ(m.points().size(), 3u);
  EXPECT_EQ(m.points()[0].tsc, 1000u);
  EXPECT_EQ(m.points()[2].tsc, 3000u);
  EXPECT_EQ(m.mono_to_tsc(250), 2500u);
}

TEST(ClockMap, NeedsTwoPoints) {
  ClockMap none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.tsc_hz(), 0);
  EXPECT_THROW(none.mono_to_tsc(1), std::domain_error);
  ClockMap one({{1, 1, 0, 0}});
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(one.tsc_hz(), 0);
  EXPECT_THROW(one.tsc_to_mono(1), std::domain_error);
}

TEST(ClockSample, WidthAndOrder) {
  ClockPoint a = sample_clock_point();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ClockPoint b = sample_clock_point(3);
  EXPECT_GT(a.width_ticks, 0u);
  EXPECT_GT(b.width_ticks, 0u);
  EXPECT_LT(a.width_ticks, 100'000'000u);  // a bracket is a few hundred ticks, not tens of ms
  EXPECT_GT(b.tsc, a.tsc);
  EXPECT_GT(b.mono_ns, a.mono_ns);
  double hz = ClockMap({a, b}).tsc_hz();
  EXPECT_GT(hz, 1e8);  // sanity only: any real TSC runs between 100 MHz and 100 GHz
  EXPECT_LT(hz, 1e11);
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {

// A segment the model cannot vouch for falls back to [point i, point i+1]: over
// 10 s at 2.9 GHz that is 2.9e10 ticks, far beyond 32 bits. The stamp's error
// must carry it whole (it was clamped to UINT32_MAX, ~1.5 s here: a bound too
// narrow, silently).
TEST(ClockMap, LongFallbackSegmentKeepsItsWholeWidth) {
  std::vector<ClockPoint> pts;
  for (uint64_t s : {0ull, 10ull, 20ull, 30ull}) {
    uint64_t m = kMono0 + s * 1'000'000'000ull;
    pts.push_back({linear_tsc(m), m, 10, 0});
  }
  // Two witnessed changes in the middle segment: not checkable, falls back.
  uint64_t mid = kMono0 + 15'000'000'000ull;
  ClockMap map(pts, {{mid - 1000, mid}, {mid + 1000, mid + 2000}});
  EXPECT_GT(map.model_stats().crowded, 0u);
  ClockMap::Stamp st = map.mono_to_stamp(mid);
  TscBounds b = map.mono_to_tsc_bounds(mid);
  EXPECT_GT(b.hi - b.lo, uint64_t(UINT32_MAX));
  EXPECT_LE(st.ts - st.err, b.lo);
  EXPECT_GE(st.ts + st.err, b.hi);
}

}  // namespace
}  // namespace cptrace
