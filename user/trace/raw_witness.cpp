// CLOCK_MONOTONIC_RAW against the TSC, segment by segment (raw_witness.h).
#include "trace/raw_witness.h"

#include <algorithm>
#include <cmath>

#include "trace/least_squares.h"

namespace cptrace {
namespace {

using ld = long double;

struct Line {
  std::vector<ld> ns, tsc, tol_base;  // per point: RAW ns and tick from the first point; per segment: tolerance
  ld rate = 0, rel = 0, q = 0;
  ld offset(size_t j) const { return tsc[j] - rate * ns[j]; }
  ld tolerance(size_t i) const { return tol_base[i] + 2 * q + rel * rate * (ns[i + 1] - ns[i]); }
  bool departs(size_t i) const { return std::fabs(offset(i + 1) - offset(i)) > tolerance(i); }
};

// The rate once the departures are taken out: a step moves a least-squares
// slope by ~step/span, which over a short recording is several ns per segment.
// Each pass removes the departed segments' jumps from the offsets and refits.
void refine(Line& l) {
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<ld> o(l.ns.size());
    ld removed = 0;
    o[0] = l.offset(0);
    for (size_t i = 0; i + 1 < l.ns.size(); ++i) {
      if (l.departs(i)) removed += l.offset(i + 1) - l.offset(i);
      o[i + 1] = l.offset(i + 1) - removed;
    }
    l.rate += least_squares_slope(l.ns, o);
  }
}

}  // namespace

RawWitness raw_witness(const std::vector<ClockPoint>& pts, uint64_t raw_quantum_ns) {
  RawWitness w;
  if (pts.size() < 3 || !std::all_of(pts.begin(), pts.end(), [](const ClockPoint& p) { return p.has_raw(); })) return w;
  Line l;
  const ClockPoint &f = pts.front(), &last = pts.back();
  for (const ClockPoint& p : pts) {
    l.ns.push_back(ld(p.raw_ns) - ld(f.raw_ns));
    l.tsc.push_back(ld(p.raw_tsc) - ld(f.raw_tsc));
  }
  // Each midpoint is within half its width (+1 for rounding) of the true tick;
  // each reading within one quantum of the true RAW; the simulated transform's
  // floor adds up to one tick per point.
  for (size_t i = 0; i + 1 < pts.size(); ++i)
    l.tol_base.push_back(ld(pts[i].raw_width_ticks + pts[i + 1].raw_width_ticks) / 2 + 4);
  l.rate = least_squares_slope(l.ns, l.tsc);
  if (!(l.rate > 0) || !(l.ns.back() > 0)) return w;
  l.q = ld(raw_quantum_ns) * l.rate;
  // The rate's own uncertainty, relative: the end brackets over the span.
  l.rel = (ld(f.raw_width_ticks + last.raw_width_ticks) + 4 + 2 * l.q) / (l.rate * l.ns.back());
  refine(l);
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    w.checked++;
    if (!l.departs(i)) continue;
    w.departed++;
    w.largest_ns = std::max(w.largest_ns, (std::fabs(l.offset(i + 1) - l.offset(i)) - l.tolerance(i)) / l.rate);
    w.spans.push_back({pts[i].mono_ns, pts[i + 1].mono_ns});
  }
  return w;
}

}  // namespace cptrace
