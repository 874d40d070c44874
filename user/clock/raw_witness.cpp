// CLOCK_MONOTONIC_RAW against the TSC, segment by segment (raw_witness.h).
#include "clock/raw_witness.h"

#include <algorithm>
#include <cmath>

#include "clock/least_squares.h"

namespace cptrace {
namespace {

using ld = long double;

// A run can hold a migration there and back, or a few; a stream that keeps
// asking for more splits is noise, and its departures stay departures.
constexpr size_t kMaxRateChanges = 16;

// One line of RAW against the TSC over points [b, e] of the stream.
struct Line {
  size_t b = 0;
  std::vector<ld> ns, tsc, tol_base;  // per point: RAW ns and tick from point b; per segment: tolerance
  ld rate = 0, rel = 0, q = 0;
  size_t size() const { return ns.size(); }
  ld offset(size_t j) const { return tsc[j] - rate * ns[j]; }
  ld tolerance(size_t i) const { return tol_base[i] + 2 * q + rel * rate * (ns[i + 1] - ns[i]); }
  bool departs(size_t i) const { return std::fabs(offset(i + 1) - offset(i)) > tolerance(i); }
  size_t departures() const {
    size_t n = 0;
    for (size_t i = 0; i + 1 < size(); ++i) n += departs(i);
    return n;
  }
};

// The rate once the departures are taken out: a step moves a least-squares
// slope by ~step/span, which over a short recording is several ns per segment.
// Each pass removes the departed segments' jumps from the offsets and refits.
void refine(Line& l) {
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<ld> o(l.size());
    ld removed = 0;
    o[0] = l.offset(0);
    for (size_t i = 0; i + 1 < l.size(); ++i) {
      if (l.departs(i)) removed += l.offset(i + 1) - l.offset(i);
      o[i + 1] = l.offset(i + 1) - removed;
    }
    l.rate += least_squares_slope(l.ns, o);
  }
}

// The least-squares line through points [b, e] (at least two), refined; rate 0
// when the points do not advance.
Line fit(const std::vector<ClockPoint>& pts, size_t b, size_t e, uint64_t raw_quantum_ns) {
  Line l;
  l.b = b;
  const ClockPoint &f = pts[b], &last = pts[e];
  for (size_t j = b; j <= e; ++j) {
    l.ns.push_back(ld(pts[j].raw_ns) - ld(f.raw_ns));
    l.tsc.push_back(ld(pts[j].raw_tsc) - ld(f.raw_tsc));
  }
  // Each midpoint is within half its width (+1 for rounding) of the true tick;
  // each reading within one quantum of the true RAW; the simulated transform's
  // floor adds up to one tick per point.
  for (size_t j = b; j < e; ++j) l.tol_base.push_back(ld(pts[j].raw_width_ticks + pts[j + 1].raw_width_ticks) / 2 + 4);
  l.rate = least_squares_slope(l.ns, l.tsc);
  if (!(l.rate > 0) || !(l.ns.back() > 0)) {
    l.rate = 0;
    return l;
  }
  l.q = ld(raw_quantum_ns) * l.rate;
  // The rate's own uncertainty, relative: the end brackets over the span.
  l.rel = (ld(f.raw_width_ticks + last.raw_width_ticks) + 4 + 2 * l.q) / (l.rate * l.ns.back());
  refine(l);
  return l;
}

// Whether two lines' rates differ by more than both are uncertain: a split
// between lines that agree is no rate change (a shorter piece's looser
// tolerance can hide a marginal departure without one).
bool rates_differ(const Line& a, const Line& b) { return std::fabs(a.rate - b.rate) > a.rel * a.rate + b.rel * b.rate; }

// Where one line turns into another: the k that splits the points into [0, k]
// and [k+1, n-1] with the least total squared residual of a line fitted to
// each side (two-phase regression). The sums run over the offsets from `l`,
// whose magnitudes are the departures, not the ticks, so long double keeps
// them over hours. n when there is no split with two points on each side.
size_t best_split(const Line& l) {
  const size_t n = l.size();
  if (n < 4) return n;
  // Prefix sums of 1, x, y, xx, xy, yy: x the RAW ns, y the offset.
  struct Sums {
    ld c = 0, x = 0, y = 0, xx = 0, xy = 0, yy = 0;
  };
  std::vector<Sums> s(n + 1);
  for (size_t j = 0; j < n; ++j) {
    ld x = l.ns[j], y = l.offset(j);
    s[j + 1] = {s[j].c + 1, s[j].x + x, s[j].y + y, s[j].xx + x * x, s[j].xy + x * y, s[j].yy + y * y};
  }
  auto ssr = [&](size_t from, size_t to) {  // points [from, to)
    const Sums &a = s[from], &z = s[to];
    ld c = z.c - a.c, x = z.x - a.x, y = z.y - a.y;
    ld vxx = (z.xx - a.xx) - x * x / c, vxy = (z.xy - a.xy) - x * y / c, vyy = (z.yy - a.yy) - y * y / c;
    return vxx > 0 ? vyy - vxy * vxy / vxx : vyy;
  };
  size_t best = n;
  ld best_ssr = 0;
  for (size_t k = 1; k + 2 < n; ++k) {
    ld v = ssr(0, k + 1) + ssr(k + 1, n);
    if (best == n || v < best_ssr) best = k, best_ssr = v;
  }
  return best;
}

struct Witness {
  const std::vector<ClockPoint>& pts;
  uint64_t q;
  RawWitness w;
  size_t budget = 4 * kMaxRateChanges;  // splits weighed, at O(points) each

  // The fewest departures points [b, e] (on `l`) show, as one line or split
  // where two lines fit best and each side split again the same way; the
  // segments between the lines count as departed. A split stands only when it
  // lowers the count: a side that still holds a second change departs in its
  // segments until that one is split too, so the sides are weighed split.
  size_t plan(const Line& l, std::vector<size_t>& cuts) {
    size_t d = l.departures();
    if (d < 2 || budget == 0) return d;
    budget--;
    size_t k = best_split(l), e = l.b + l.size() - 1;
    if (k >= l.size()) return d;
    Line left = fit(pts, l.b, l.b + k, q), right = fit(pts, l.b + k + 1, e, q);
    if (!(left.rate > 0) || !(right.rate > 0) || !rates_differ(left, right)) return d;
    std::vector<size_t> lc, rc;
    size_t split = plan(left, lc) + plan(right, rc) + 1;
    if (split >= d || lc.size() + rc.size() + 1 > kMaxRateChanges) return d;
    cuts = std::move(lc);
    cuts.push_back(l.b + k);
    cuts.insert(cuts.end(), rc.begin(), rc.end());
    return split;
  }

  // Splitting first where one cut fits best can cut where no change is (a
  // change there and back is split best in the middle first): a cut whose two
  // sides make one line departing no more than they do apart, or whose sides'
  // rates agree, goes.
  void prune(std::vector<size_t>& cuts) const {
    for (size_t ci = 0; ci < cuts.size();) {
      size_t b = ci == 0 ? 0 : cuts[ci - 1] + 1, e = ci + 1 < cuts.size() ? cuts[ci + 1] : pts.size() - 1;
      Line one = fit(pts, b, e, q), left = fit(pts, b, cuts[ci], q), right = fit(pts, cuts[ci] + 1, e, q);
      size_t apart = left.departures() + right.departures() + 1;
      if (one.rate > 0 && (one.departures() <= apart || !rates_differ(left, right))) {
        cuts.erase(cuts.begin() + ptrdiff_t(ci));
        ci = 0;
      } else {
        ci++;
      }
    }
  }

  void departed(size_t i) {
    w.checked++, w.departed++;
    w.spans.push_back({pts[i].mono_ns, pts[i + 1].mono_ns});
  }

  // One line's segments, checked.
  void piece(const Line& l) {
    w.pieces.push_back({l.b, l.b + l.size() - 1, double(l.rate * 1e9L)});
    for (size_t i = 0; i + 1 < l.size(); ++i) {
      if (!l.departs(i)) {
        w.checked++;
        continue;
      }
      departed(l.b + i);
      w.largest_ns = std::max(w.largest_ns, (std::fabs(l.offset(i + 1) - l.offset(i)) - l.tolerance(i)) / l.rate);
    }
  }

  void run(const Line& whole) {
    std::vector<size_t> cuts;
    plan(whole, cuts);
    prune(cuts);
    if (cuts.empty()) return piece(whole);
    size_t b = 0;
    for (size_t c : cuts) {
      piece(fit(pts, b, c, q));
      departed(c);  // the change lies in it
      w.rate_changes.push_back(c);
      b = c + 1;
    }
    piece(fit(pts, b, pts.size() - 1, q));
  }
};

}  // namespace

RawWitness raw_witness(const std::vector<ClockPoint>& pts, uint64_t raw_quantum_ns) {
  if (pts.size() < 3 || !std::all_of(pts.begin(), pts.end(), [](const ClockPoint& p) { return p.has_raw(); }))
    return {};
  Line l = fit(pts, 0, pts.size() - 1, raw_quantum_ns);
  if (!(l.rate > 0)) return {};
  Witness w{pts, raw_quantum_ns, {}};
  w.run(l);
  return std::move(w.w);
}

}  // namespace cptrace
