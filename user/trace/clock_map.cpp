// Clock-correlation points and the piecewise-linear TSC <-> CLOCK_MONOTONIC map.
#include "trace/clock_map.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#else
#error "cptrace reads the x86 TSC"
#endif

namespace cptrace {
namespace {

using u128 = unsigned __int128;
using Member = uint64_t ClockPoint::*;

// a * b / c rounded to nearest. a * b < 2^128 - 2^65 and c / 2 < 2^63, so the sum
// cannot overflow; the quotient can exceed 64 bits, callers saturate.
u128 scale(uint64_t a, uint64_t b, uint64_t c) {
  return (static_cast<u128>(a) * b + c / 2) / c;
}

uint64_t saturating_add(uint64_t y, u128 d) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return d > kMax - y ? kMax : y + static_cast<uint64_t>(d);
}

uint64_t saturating_sub(uint64_t y, u128 d) { return d > y ? 0 : y - static_cast<uint64_t>(d); }

// Maps x (in clock X) to clock Y over points sorted and strictly increasing in
// both. The segment for x is the last one starting at or before x (the first one
// before the first point, the last one after the last point), so the result is
// continuous and monotonic across segments.
uint64_t convert(const std::vector<ClockPoint>& pts, uint64_t x, Member X, Member Y) {
  if (pts.size() < 2)
    throw std::domain_error("clock map needs at least two correlation points (has " +
                            std::to_string(pts.size()) + ")");
  auto it = std::upper_bound(pts.begin(), pts.end(), x,
                             [X](uint64_t v, const ClockPoint& p) { return v < p.*X; });
  size_t i = it == pts.begin() ? 0 : static_cast<size_t>(it - pts.begin()) - 1;
  i = std::min(i, pts.size() - 2);
  const ClockPoint& a = pts[i];
  const ClockPoint& b = pts[i + 1];
  uint64_t dx = b.*X - a.*X, dy = b.*Y - a.*Y;
  if (x >= a.*X) return saturating_add(a.*Y, scale(x - a.*X, dy, dx));
  return saturating_sub(a.*Y, scale(a.*X - x, dy, dx));
}

// One rdtsc / clock_gettime / rdtscp bracket. lfence keeps rdtsc from running
// early; rdtscp waits for clock_gettime to finish.
ClockPoint bracket() {
  timespec ts{};
  _mm_lfence();
  uint64_t t1 = __rdtsc();
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned aux;
  uint64_t t2 = __rdtscp(&aux);
  uint64_t w = t2 - t1;
  ClockPoint p;
  p.tsc = t1 + w / 2;
  p.mono_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  p.width_ticks = static_cast<uint32_t>(std::min<uint64_t>(w, std::numeric_limits<uint32_t>::max()));
  return p;
}

}  // namespace

ClockPoint sample_clock_point(int brackets) {
  ClockPoint best = bracket();
  for (int i = 1; i < brackets; ++i) {
    ClockPoint p = bracket();
    if (p.width_ticks < best.width_ticks) best = p;
  }
  return best;
}

ClockMap::ClockMap(std::vector<ClockPoint> pts, std::vector<uint64_t> change_marks) {
  std::sort(pts.begin(), pts.end(), [](const ClockPoint& a, const ClockPoint& b) {
    return a.tsc != b.tsc ? a.tsc < b.tsc : a.mono_ns < b.mono_ns;
  });
  // Greedy: a point survives if it advances both clocks past the last survivor.
  // Points come from one machine's two monotonic clocks, so anything else is a
  // duplicate or a corrupt record.
  for (const ClockPoint& p : pts)
    if (pts_.empty() || (p.tsc > pts_.back().tsc && p.mono_ns > pts_.back().mono_ns)) pts_.push_back(p);
  bounds_ = ClockBounds(pts_, std::move(change_marks));
}

ClockMap::Stamp ClockMap::mono_to_stamp(uint64_t mono_ns) const {
  TscBounds b = bounds_.mono_to_tsc(mono_ns);
  uint64_t ts = std::clamp(mono_to_tsc(mono_ns), b.lo, b.hi);
  uint64_t e = std::max(ts - b.lo, b.hi - ts);
  return {ts, uint32_t(std::min<uint64_t>(e, std::numeric_limits<uint32_t>::max()))};
}

uint64_t ClockMap::mono_to_tsc(uint64_t mono_ns) const {
  return convert(pts_, mono_ns, &ClockPoint::mono_ns, &ClockPoint::tsc);
}

uint64_t ClockMap::tsc_to_mono(uint64_t tsc) const {
  return convert(pts_, tsc, &ClockPoint::tsc, &ClockPoint::mono_ns);
}

double ClockMap::tsc_hz() const {
  if (pts_.size() < 2) return 0;
  // Offsets from the first point keep the long double sums exact enough over hours.
  long double n = pts_.size(), mx = 0, my = 0;
  for (const ClockPoint& p : pts_) {
    mx += p.mono_ns - pts_[0].mono_ns;
    my += p.tsc - pts_[0].tsc;
  }
  mx /= n;
  my /= n;
  long double sxy = 0, sxx = 0;
  for (const ClockPoint& p : pts_) {
    long double dx = (p.mono_ns - pts_[0].mono_ns) - mx, dy = (p.tsc - pts_[0].tsc) - my;
    sxy += dx * dy;
    sxx += dx * dx;
  }
  return static_cast<double>(sxy / sxx * 1e9L);
}

}  // namespace cptrace
