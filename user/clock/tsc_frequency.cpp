// TSC frequency intervals from two correlation points (tsc_frequency.h).
#include "clock/tsc_frequency.h"

#include <algorithm>
#include <cmath>

namespace cptrace {

std::optional<TscFrequency> tsc_frequency(const ClockPoint& p1, const ClockPoint& p2, uint64_t quantum_ns) {
  TscFrequency f;
  f.raw = p1.has_raw() && p2.has_raw();
  uint64_t t1 = f.raw ? p1.raw_tsc : p1.tsc, t2 = f.raw ? p2.raw_tsc : p2.tsc;
  uint64_t n1 = f.raw ? p1.raw_ns : p1.mono_ns, n2 = f.raw ? p2.raw_ns : p2.mono_ns;
  uint32_t w1 = f.raw ? p1.raw_width_ticks : p1.width_ticks, w2 = f.raw ? p2.raw_width_ticks : p2.width_ticks;
  long double q = (long double)(quantum_ns ? quantum_ns : 1);
  if (t2 <= t1 || n2 <= n1 || (long double)(n2 - n1) <= q) return std::nullopt;
  // Each point's tsc is its bracket's midpoint (rounded down): the true tick of
  // the reading is within half the width, plus one for the rounding. Each
  // reading is the true clock value truncated to its quantum.
  long double dt = (long double)(t2 - t1), dn = (long double)(n2 - n1);
  long double w = (long double)(w1 + w2) / 2 + 2;
  f.hz = double(dt / dn * 1e9L);
  f.lo = std::nextafter(double((dt - w) / (dn + q) * 1e9L), 0.0);
  f.hi = std::nextafter(double((dt + w) / (dn - q) * 1e9L), INFINITY);
  if (!(f.lo > 0)) return std::nullopt;
  return f;
}

std::optional<TscFrequency> tsc_frequency(const std::vector<ClockPoint>& pts, size_t i, size_t j,
                                          const std::vector<size_t>& rate_changes, uint64_t quantum_ns) {
  if (i >= j || j >= pts.size()) return std::nullopt;
  auto first = std::lower_bound(rate_changes.begin(), rate_changes.end(), i);
  if (first == rate_changes.end() || *first >= j) return tsc_frequency(pts[i], pts[j], quantum_ns);
  // The pieces holding a point of [i, j]: from the one before the first change
  // in the stretch to the one after the last.
  auto last = std::lower_bound(first, rate_changes.end(), j);
  std::optional<TscFrequency> hull;
  for (auto c = first;; ++c) {
    size_t from = c == rate_changes.begin() ? 0 : *(c - 1) + 1;
    size_t to = c == rate_changes.end() ? pts.size() - 1 : *c;
    auto f = from < to ? tsc_frequency(pts[from], pts[to], quantum_ns) : std::nullopt;
    if (!f) return std::nullopt;
    if (!hull)
      hull = f;
    else
      hull->lo = std::min(hull->lo, f->lo), hull->hi = std::max(hull->hi, f->hi), hull->raw = hull->raw && f->raw;
    if (c == last) break;
  }
  // The estimate: the stretch's own average, inside the hull whatever the
  // mixture of rates was.
  if (auto avg = tsc_frequency(pts[i], pts[j], quantum_ns)) hull->hz = std::clamp(avg->hz, hull->lo, hull->hi);
  return hull;
}

}  // namespace cptrace
