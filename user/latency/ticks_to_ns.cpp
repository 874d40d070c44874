// Reference-TSC ticks to ns: the long double reference formula and the
// frequency factors of the double one (ticks_to_ns.h).
#include "latency/ticks_to_ns.h"

#include <algorithm>
#include <cmath>

namespace cptrace {

NsBound ticks_to_ns_long_double(int64_t ticks, int64_t lo_t, int64_t hi_t, long double hz, long double lo_hz,
                                long double hi_hz) {
  auto conv = [](int64_t t, long double f) { return (long double)t * 1e9L / f; };
  long double lo = lo_t >= 0 ? conv(lo_t, hi_hz) : conv(lo_t, lo_hz);
  long double hi = hi_t >= 0 ? conv(hi_t, lo_hz) : conv(hi_t, hi_hz);
  NsBound b;
  b.lo = int64_t(std::floor(lo - 1e-6L));
  b.hi = int64_t(std::ceil(hi + 1e-6L));
  b.ns = std::clamp(int64_t(std::llround(conv(ticks, hz))), b.lo, b.hi);
  return b;
}

namespace {

bool holds_double(long double f) { return (long double)(double)f == f && f > 0 && f < 1e30L; }

}  // namespace

TicksToNs::TicksToNs(long double hz, long double hz_lo, long double hz_hi)
    : hz_(hz),
      hz_lo_(hz_lo),
      hz_hi_(hz_hi),
      in_double_(holds_double(hz) && holds_double(hz_lo) && holds_double(hz_hi)),
      k_(in_double_ ? 1e9 / double(hz) : 0),
      k_lo_(in_double_ ? 1e9 / double(hz_lo) : 0),
      k_hi_(in_double_ ? 1e9 / double(hz_hi) : 0) {}

NsBound ticks_to_ns(int64_t ticks, int64_t lo_t, int64_t hi_t, long double hz, long double lo_hz, long double hi_hz) {
  return TicksToNs(hz, lo_hz, hi_hz)(ticks, lo_t, hi_t);
}

}  // namespace cptrace
