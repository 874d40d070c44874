// ticks_to_ns computes in double and falls back to the long double formula
// near a rounding boundary: its NsBound must be the long double one's, bit for
// bit, on any input. Random inputs rarely land near a boundary, so most cases
// here are built to: values at k + 0.5 and at integers +- 1e-6 (the bound's
// outward shift), exact quotients, huge and negative ticks, odd frequencies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "latency/latency.h"

namespace cptrace {
namespace {

struct Mismatches {
  uint64_t checked = 0, differ = 0;
  void check(int64_t t, int64_t lo, int64_t hi, double hz, double hz_lo, double hz_hi) {
    NsBound a = ticks_to_ns(t, lo, hi, hz, hz_lo, hz_hi);
    NsBound b = ticks_to_ns_long_double(t, lo, hi, hz, hz_lo, hz_hi);
    ++checked;
    if (a.ns != b.ns || a.lo != b.lo || a.hi != b.hi) {
      if (++differ <= 5)
        ADD_FAILURE() << "ticks " << t << " [" << lo << ", " << hi << "] at " << hz << " [" << hz_lo << ", " << hz_hi
                      << "]: fast " << a.ns << " [" << a.lo << ", " << a.hi << "], long double " << b.ns << " [" << b.lo
                      << ", " << b.hi << "]";
    }
  }
};

// Frequencies as translate measures them: an estimate and a strict interval a
// few ppm wide, plus exact and odd ones.
double random_hz(std::mt19937_64& g) {
  static const double kExact[] = {1e9, 2e9, 3e9, 2.5e9, 1e6, 7e9 / 3, 1.0, 3.0, 999999999.0, 2399999999.5};
  if (g() % 4 == 0) return kExact[g() % std::size(kExact)];
  return std::uniform_real_distribution<double>(1e6, 5e9)(g);
}

int64_t random_ticks(std::mt19937_64& g) {
  switch (g() % 5) {
    case 0:
      return int64_t(g() % 2000) - 1000;  // around zero
    case 1:
      return int64_t(g() % 20'000'000'000ull) - 10'000'000'000ll;  // seconds
    case 2:
      return int64_t(g());  // anything, to +-2^63
    case 3:
      return int64_t(g() >> (g() % 64));  // every magnitude
    default:
      return -int64_t(g() >> (1 + g() % 63));
  }
}

TEST(LatencyTicksToNs, FastEqualsLongDoubleOnRandomInputs) {
  std::mt19937_64 g(38);
  Mismatches m;
  for (int i = 0; i < 3'000'000; ++i) {
    const double hz = random_hz(g);
    const double width = g() % 3 ? hz * 1e-6 * double(g() % 100) : 0.0;
    const int64_t t = random_ticks(g);
    const int64_t below = int64_t(g() % 100000), above = int64_t(g() % 100000);
    const int64_t lo = t > INT64_MIN + below ? t - below : t, hi = t < INT64_MAX - above ? t + above : t;
    m.check(t, lo, hi, hz, hz - width, hz + width);
  }
  EXPECT_EQ(m.differ, 0u) << "of " << m.checked;
}

// Ticks and frequencies whose quotient t * 1e9 / f lies at (or a few ulps
// from) k + 0.5, k + 1e-6 and k - 1e-6: where a double error of one ulp would
// move the rounding.
TEST(LatencyTicksToNs, FastEqualsLongDoubleNearRoundingBoundaries) {
  std::mt19937_64 g(3838);
  Mismatches m;
  const double kOffsets[] = {0.5, 1e-6, -1e-6, 0.0, 0.5 + 1e-12, 0.5 - 1e-12, 1e-6 + 1e-15, -1e-6 - 1e-15};
  for (int i = 0; i < 1'000'000; ++i) {
    // The target value in ns, and ticks for it: f chosen so that t * 1e9 / f
    // is the target as nearly as double can say, then nudged by ulps.
    const int64_t k = int64_t(g() >> (g() % 64 + 1)) * (g() % 2 ? 1 : -1);
    const double target = double(k) + kOffsets[g() % std::size(kOffsets)];
    if (target == 0) continue;
    int64_t t = int64_t(g() % 4'000'000'000ull) + 1;
    if (target < 0) t = -t;
    double hz = double(t) * 1e9 / target;
    if (!(hz > 0) || !std::isfinite(hz)) continue;
    for (int ulps = g() % 4; ulps > 0; --ulps) hz = std::nextafter(hz, g() % 2 ? 0.0 : 1e300);
    // The same point as estimate and as both ends, each end's frequency at
    // the estimate's (so lo, hi and ns all sit on the boundary).
    m.check(t, t, t, hz, hz, hz);
    m.check(t, t - 1, t + 1, hz, hz, hz);
  }
  // Exact quotients: 1 GHz (ns = ticks) and 2 GHz (every odd tick count at .5).
  for (int64_t t = -200000; t <= 200000; ++t) {
    m.check(t, t, t, 1e9, 1e9, 1e9);
    m.check(t, t - 3, t + 3, 2e9, 2e9, 2e9);
    m.check(t, t, t + 1, 4e9, 3e9, 5e9);
  }
  EXPECT_EQ(m.differ, 0u) << "of " << m.checked;
}

// Inputs the double path must leave to the long double formula: huge values,
// frequencies double cannot hold or does not know (0 in a trace without one is
// never converted, but the function stays total where long double is).
TEST(LatencyTicksToNs, FastEqualsLongDoubleOnExtremes) {
  Mismatches m;
  const int64_t kTicks[] = {0,
                            1,
                            -1,
                            INT64_MAX,
                            INT64_MIN + 1,
                            INT64_MAX / 1000,
                            INT64_MIN / 1000,
                            1ll << 53,
                            (1ll << 53) + 1,
                            -(1ll << 53) - 1,
                            4'600'000'000'000'000'000ll / 1000};
  const double kHz[] = {1e9, 3e9, 1e12, 1e15, 2.0, 0.5};
  for (int64_t t : kTicks)
    for (double hz : kHz) {
      long double x = (long double)t * 1e9L / hz;
      if (std::fabs(x) > 9e18L) continue;  // beyond int64: undefined either way
      m.check(t, t, t, hz, hz, hz);
      m.check(t, t, t, hz, hz * 0.999, hz * 1.001);
    }
  // A frequency with more precision than a double: the long double path only.
  long double odd = 2.4e9L + 1e-4L;
  EXPECT_EQ(ticks_to_ns(12345, 12340, 12350, odd, odd, odd).ns,
            ticks_to_ns_long_double(12345, 12340, 12350, odd, odd, odd).ns);
  EXPECT_EQ(m.differ, 0u) << "of " << m.checked;
}

}  // namespace
}  // namespace cptrace
