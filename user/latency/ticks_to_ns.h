// Reference-TSC ticks to ns with a strict bound, over the reference's measured
// frequency interval: every duration `latency`, `export` and `top RUN` give in
// ns goes through here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace cptrace {

// A reference-TSC tick count (estimate and strict [lo, hi]) in ns over the
// frequency interval [hz_lo, hz_hi]: the bound rounded outward so that it stays
// strict, the estimate at hz rounded to the nearest and clamped into the bound.
struct NsBound {
  int64_t ns = 0, lo = 0, hi = 0;
};
// Computed in double, with the long double formula (ticks_to_ns_long_double,
// the reference) only where double's error could change a rounding: the same
// result on every input.
NsBound ticks_to_ns(int64_t ticks, int64_t lo, int64_t hi, long double hz, long double hz_lo, long double hz_hi);
NsBound ticks_to_ns_long_double(int64_t ticks, int64_t lo, int64_t hi, long double hz, long double hz_lo,
                                long double hz_hi);

namespace ticks_to_ns_detail {

// The long double formula's three roundings (floor, ceil, llround) in double.
// The double value of t * (1e9 / f) +- 1e-6 is within 6 ulps (2^-53 relative
// each: t's conversion, the factor 1e9 / f, the product, the shift by 1e-6) of
// the long double one, itself within 2^-62 of the exact value; kSlack covers
// that with a margin of 100x, plus an absolute 1e-13 for the shift near zero.
// When the rounding of every point within the slack is the same integer, the
// long double value (which lies within it) rounds to that integer too: floor,
// ceil and round are monotone. Otherwise (a value within the slack of a
// rounding boundary, beyond 2^62, not finite, or a frequency double cannot
// hold) the caller falls back to the long double formula.
constexpr double kSlack = 1e-13;
constexpr double kLimit = 4.6e18;  // below 2^62: int64 holds every rounding

template <double (*Round)(double)>
inline bool rounds_alike(double v, int64_t& out) {
  const double e = std::fabs(v) * kSlack + kSlack;
  if (!(std::fabs(v) + e < kLimit)) return false;  // also NaN
  const double a = Round(v - e), b = Round(v + e);
  if (a != b) return false;
  out = int64_t(a);
  return true;
}

}  // namespace ticks_to_ns_detail

// ticks_to_ns at one frequency interval, its three factors 1e9 / f computed once
// (a multiplication per value instead of a division): the same results. Inline:
// `latency` converts every row through it.
class TicksToNs {
 public:
  TicksToNs(long double hz, long double hz_lo, long double hz_hi);
  NsBound operator()(int64_t ticks, int64_t lo_t, int64_t hi_t) const {
    using ticks_to_ns_detail::rounds_alike;
    if (in_double_) {
      const double lo = double(lo_t) * (lo_t >= 0 ? k_hi_ : k_lo_);
      const double hi = double(hi_t) * (hi_t >= 0 ? k_lo_ : k_hi_);
      NsBound b;
      int64_t ns;
      if (rounds_alike<std::floor>(lo - 1e-6, b.lo) && rounds_alike<std::ceil>(hi + 1e-6, b.hi) &&
          rounds_alike<std::round>(double(ticks) * k_, ns)) {
        b.ns = std::clamp(ns, b.lo, b.hi);
        return b;
      }
    }
    return ticks_to_ns_long_double(ticks, lo_t, hi_t, hz_, hz_lo_, hz_hi_);
  }

 private:
  long double hz_, hz_lo_, hz_hi_;
  bool in_double_;  // all three held exactly by a double
  double k_, k_lo_, k_hi_;  // 1e9 / hz, 1e9 / hz_lo, 1e9 / hz_hi
};

}  // namespace cptrace
