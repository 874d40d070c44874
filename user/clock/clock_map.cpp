// Clock-correlation points and the piecewise-linear TSC <-> CLOCK_MONOTONIC map.
#include "clock/clock_map.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#else
#error "cptrace reads the x86 TSC"
#endif

#include "clock/least_squares.h"
#include "clock/clock_now.h"

namespace cptrace {
namespace {

using u128 = unsigned __int128;
using Member = uint64_t ClockPoint::*;

// a * b / c rounded to nearest. a * b < 2^128 - 2^65 and c / 2 < 2^63, so the sum
// cannot overflow; the quotient can exceed 64 bits, callers saturate.
u128 scale(uint64_t a, uint64_t b, uint64_t c) { return (static_cast<u128>(a) * b + c / 2) / c; }

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
    throw std::domain_error("clock map needs at least two correlation points (has " + std::to_string(pts.size()) + ")");
  auto it = std::upper_bound(pts.begin(), pts.end(), x, [X](uint64_t v, const ClockPoint& p) { return v < p.*X; });
  size_t i = it == pts.begin() ? 0 : static_cast<size_t>(it - pts.begin()) - 1;
  i = std::min(i, pts.size() - 2);
  const ClockPoint& a = pts[i];
  const ClockPoint& b = pts[i + 1];
  uint64_t dx = b.*X - a.*X, dy = b.*Y - a.*Y;
  if (x >= a.*X) return saturating_add(a.*Y, scale(x - a.*X, dy, dx));
  return saturating_sub(a.*Y, scale(a.*X - x, dy, dx));
}

// One rdtsc / clock_gettime / rdtsc bracket. The first lfence keeps rdtsc from
// running early; the second waits for clock_gettime to finish (as rdtscp would,
// but rdtscp faults on CPUs some VMs present).
ClockPoint bracket(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  _mm_lfence();
  uint64_t t1 = __rdtsc();
  clock_gettime(clock, &ts);
  _mm_lfence();
  uint64_t t2 = __rdtsc();
  uint64_t w = t2 - t1;
  ClockPoint p;
  p.tsc = t1 + w / 2;
  p.mono_ns = uint64_t(timespec_ns(ts));  // a clock since boot: never negative
  p.width_ticks = static_cast<uint32_t>(std::min<uint64_t>(w, std::numeric_limits<uint32_t>::max()));
  return p;
}

ClockPoint tightest_bracket(clockid_t clock, int brackets) {
  ClockPoint best = bracket(clock);
  for (int i = 1; i < brackets; ++i) {
    ClockPoint p = bracket(clock);
    if (p.width_ticks < best.width_ticks) best = p;
  }
  return best;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC as a strict interval [lo, lo + width]: m1 r1 m2
// r2 m3 gives two intervals [r - m_after, r - m_before] that both contain the
// offset while it is constant; disjoint ones mean a step happened in between, and
// the reading is retried. The kernel keeps the offset exactly constant between
// steps (both clocks add the same accumulated ns to their own base), so any
// change between two correlation points is a step, not drift.
bool realtime_offset(int64_t& lo, uint32_t& width, int tries = 5) {
  bool found = false;
  for (int i = 0; i < tries; ++i) {
    int64_t m1 = clock_now_ns(CLOCK_MONOTONIC), r1 = clock_now_ns(CLOCK_REALTIME), m2 = clock_now_ns(CLOCK_MONOTONIC);
    int64_t r2 = clock_now_ns(CLOCK_REALTIME), m3 = clock_now_ns(CLOCK_MONOTONIC);
    int64_t l = std::max(r1 - m2, r2 - m3), h = std::min(r1 - m1, r2 - m2);
    if (l > h) continue;  // a step between the reads
    if (!found || h - l < int64_t(width)) {
      lo = l;
      width = uint32_t(std::min<int64_t>(h - l, std::numeric_limits<uint32_t>::max()));
      found = true;
    }
  }
  return found;
}

}  // namespace

ClockPoint sample_clock_point(int brackets) {
  // MONOTONIC first and alone, as tight as it ever was; RAW and REALTIME after,
  // each with its own error.
  ClockPoint best = tightest_bracket(CLOCK_MONOTONIC, brackets);
  ClockPoint raw = tightest_bracket(CLOCK_MONOTONIC_RAW, std::max(1, brackets / 2));
  best.raw_tsc = raw.tsc;
  best.raw_ns = raw.mono_ns;
  best.raw_width_ticks = raw.width_ticks;
  best.flags |= kClockHasRaw;
  if (realtime_offset(best.rt_minus_mono_ns, best.rt_width_ns)) best.flags |= kClockHasRealtime;
  return best;
}

namespace {

// TSC ticks per CLOCK_MONOTONIC ns within the envelope: TSC per RAW ns, strictly
// from the first and last points' brackets (RAW one line, no departure), over
// the envelope's MONOTONIC ns per RAW ns.
TicksPerNs envelope_ticks(const std::vector<ClockPoint>& pts, const RawWitness& raw, uint64_t raw_quantum,
                          RateEnvelope env) {
  if (!env.known() || pts.size() < 2 || raw.departed || !raw.rate_changes.empty()) return {};
  const ClockPoint &f = pts.front(), &l = pts.back();
  if (!f.has_raw() || !l.has_raw() || l.raw_ns <= f.raw_ns + 2 * raw_quantum) return {};
  auto lo_tick = [](const ClockPoint& p) { return (long double)p.raw_tsc - p.raw_width_ticks / 2.0L - 1; };
  auto hi_tick = [](const ClockPoint& p) { return (long double)p.raw_tsc + p.raw_width_ticks / 2.0L + 1; };
  long double span = (long double)(l.raw_ns - f.raw_ns), q = (long double)raw_quantum;
  long double k_lo = (lo_tick(l) - hi_tick(f)) / (span + q), k_hi = (hi_tick(l) - lo_tick(f)) / (span - q);
  if (!(k_lo > 0)) return {};
  return {k_lo / env.hi, k_hi / env.lo};
}

}  // namespace

ClockMap::ClockMap(std::vector<ClockPoint> pts, std::vector<ClockChange> changes, ClockReading reading,
                   std::vector<ClockChange> faults, RateEnvelope envelope)
    : reading_(reading) {
  std::sort(pts.begin(), pts.end(), [](const ClockPoint& a, const ClockPoint& b) {
    return a.tsc != b.tsc ? a.tsc < b.tsc : a.mono_ns < b.mono_ns;
  });
  // Greedy: a point survives if it advances both clocks past the last survivor.
  // Points come from one machine's two monotonic clocks, so anything else is a
  // duplicate or a corrupt record.
  for (const ClockPoint& p : pts)
    if (pts_.empty() || (p.tsc > pts_.back().tsc && p.mono_ns > pts_.back().mono_ns)) pts_.push_back(p);
  raw_ = cptrace::raw_witness(pts_, reading.raw_quantum_ns);
  faults.insert(faults.end(), raw_.spans.begin(), raw_.spans.end());
  bounds_ = ClockBounds(pts_, std::move(changes), std::move(faults), reading,
                        envelope_ticks(pts_, raw_, reading.raw_quantum_ns, envelope));
  stats_ = bounds_.stats();
  stats_.tsc_rate_changes = raw_.rate_changes.size();
}

std::optional<TscFrequency> ClockMap::tsc_frequency(size_t i, size_t j) const {
  bool raw = i < j && j < pts_.size() && pts_[i].has_raw() && pts_[j].has_raw();
  return cptrace::tsc_frequency(pts_, i, j, raw_.rate_changes, raw ? reading_.raw_quantum_ns : reading_.quantum_ns);
}

ClockMap::Stamp ClockMap::mono_to_stamp(uint64_t mono_ns) const {
  TscBounds b = bounds_.mono_to_tsc(mono_ns);
  uint64_t ts = std::clamp(mono_to_tsc(mono_ns), b.lo, b.hi);
  return {ts, std::max(ts - b.lo, b.hi - ts)};
}

uint64_t ClockMap::mono_to_tsc(uint64_t mono_ns) const {
  return convert(pts_, mono_ns, &ClockPoint::mono_ns, &ClockPoint::tsc);
}

uint64_t ClockMap::tsc_to_mono(uint64_t tsc) const {
  return convert(pts_, tsc, &ClockPoint::tsc, &ClockPoint::mono_ns);
}

// Least-squares slope of TSC over the clock's ns. CLOCK_MONOTONIC_RAW when
// every point carries it: NTP bends CLOCK_MONOTONIC (a 2 % tick slew would put
// 2 % into every duration shown in ns), RAW follows the clocksource alone.
nlohmann::json clock_model_json(const ClockMap& map) {
  const ClockModelStats& s = map.model_stats();
  nlohmann::json j = {{"segments", s.segments},
                      {"one_rate", s.one_rate},
                      {"rate_change", s.rate_change},
                      {"either", s.either},
                      {"violated", s.violated},
                      {"enveloped", s.enveloped},
                      {"crowded", s.crowded},
                      {"departed", s.departed},
                      {"tsc_rate_changes", s.tsc_rate_changes},
                      {"raw_checked", map.raw_witness().checked},
                      {"raw_departed", map.raw_witness().departed},
                      {"quantum_ns", map.reading().quantum_ns},
                      {"raw_quantum_ns", map.reading().raw_quantum_ns}};
  // The TSC's rate on each side of every change: one frequency for the run
  // would be wrong by their difference.
  if (s.tsc_rate_changes) {
    j["tsc_pieces"] = nlohmann::json::array();
    for (const RawWitness::Piece& p : map.raw_witness().pieces)
      j["tsc_pieces"].push_back({{"from_mono_ns", map.points()[p.first].mono_ns},
                                 {"to_mono_ns", map.points()[p.last].mono_ns},
                                 {"hz", p.hz}});
  }
  return j;
}

double ClockMap::tsc_hz() const {
  if (pts_.size() < 2) return 0;
  bool raw = std::all_of(pts_.begin(), pts_.end(), [](const ClockPoint& p) { return p.has_raw(); });
  auto x = [&](const ClockPoint& p) { return raw ? p.raw_ns : p.mono_ns; };
  auto y = [&](const ClockPoint& p) { return raw ? p.raw_tsc : p.tsc; };
  const ClockPoint& p0 = pts_[0];
  std::vector<long double> xs, ys;
  for (const ClockPoint& p : pts_) {
    xs.push_back((long double)x(p) - x(p0));
    ys.push_back((long double)y(p) - y(p0));
  }
  return static_cast<double>(least_squares_slope(xs, ys) * 1e9L);
}

}  // namespace cptrace
