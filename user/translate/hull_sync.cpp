// Convex hulls of causality constraints, the feasible-line polygon, and splitting
// a span whose hulls cross.
#include "translate/hull_sync.h"

#include "translate/hull_builder.h"

#include <algorithm>

#include <fmt/format.h>

namespace cptrace {
namespace {

using i128 = __int128;

// > 0: b lies left of (above, for o.x < a.x) the directed line o -> a.
i128 cross(const Pt& o, const Pt& a, const Pt& b) {
  return i128(a.x - o.x) * (i128(b.y) - o.y) - (i128(a.y) - o.y) * (i128(b.x) - o.x);
}

// One hull side. keep_high: at equal x keep the highest point, pop left turns.
std::vector<Pt> chain(std::vector<Pt> pts, bool upper) {
  std::sort(pts.begin(), pts.end(),
            [upper](const Pt& a, const Pt& b) { return a.x != b.x ? a.x < b.x : (upper ? a.y > b.y : a.y < b.y); });
  std::vector<Pt> h;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (i > 0 && pts[i].x == pts[i - 1].x) continue;  // first of an x is the binding one
    while (h.size() >= 2) {
      i128 c = cross(h[h.size() - 2], h.back(), pts[i]);
      if (upper ? c >= 0 : c <= 0)
        h.pop_back();
      else
        break;
    }
    h.push_back(pts[i]);
  }
  return h;
}

// A recession direction of the polygon exists iff one direction's points all lie
// on one side of the other's (see the note in the report): then a slope is
// unbounded. The hulls keep the leftmost and rightmost points of their sets.
bool bounded(const std::vector<Pt>& hb, const std::vector<Pt>& ha) {
  if (hb.empty() || ha.empty()) return false;
  return ha.back().x > hb.front().x && hb.back().x > ha.front().x;
}

// Slope of edge p -> q (p.x < q.x) <= slope of l, exactly.
bool edge_slope_le(const Pt& p, const Pt& q, const Line& l) {
  return (i128(q.y) - p.y) * (i128(l.b.x) - l.a.x) <= (i128(l.b.y) - l.a.y) * (i128(q.x) - p.x);
}

// The point of a hull farthest on the wrong side of l: on the upper hull (edge
// slopes decreasing) the highest relative to l is where edge slopes drop to l's;
// on the lower hull (increasing) the lowest is where they rise to it. O(log h).
const Pt& extreme(const Line& l, const std::vector<Pt>& h, bool upper) {
  size_t lo = 0, hi = h.size() - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    bool le = edge_slope_le(h[mid], h[mid + 1], l);
    bool past = upper ? le
                      : !le || (i128(h[mid + 1].y) - h[mid].y) * (i128(l.b.x) - l.a.x) ==
                                   (i128(l.b.y) - l.a.y) * (i128(h[mid + 1].x) - h[mid].x);
    (past ? hi : lo) = past ? mid : mid + 1;
  }
  return h[lo];
}

// Line l respects every constraint: all of hb on or under it, all of ha on or over it.
bool feasible_line(const Line& l, const std::vector<Pt>& hb, const std::vector<Pt>& ha) {
  return cross(l.a, l.b, extreme(l, hb, true)) <= 0 && cross(l.a, l.b, extreme(l, ha, false)) >= 0;
}

bool same_line(const Line& a, const Line& b) { return a.cmp_slope(b) == 0 && cross(a.a, a.b, b.a) == 0; }

}  // namespace

std::vector<Pt> upper_hull(std::vector<Pt> pts) { return chain(std::move(pts), true); }
std::vector<Pt> lower_hull(std::vector<Pt> pts) { return chain(std::move(pts), false); }

const char* to_string(HullStatus s) {
  switch (s) {
    case HullStatus::Feasible:
      return "feasible";
    case HullStatus::Infeasible:
      return "infeasible (hulls cross)";
    case HullStatus::Unbounded:
      return "unbounded (too few constraints)";
  }
  return "?";
}

// Every vertex of the feasible polygon is a line tight on two constraints, i.e.
// through two hull points: two consecutive points of one hull (a line through two
// non-consecutive ones of the same hull leaves the points between on its wrong
// side, or is the same line as an edge), or one point of each hull. Each candidate
// is checked against both hulls in O(log h): O(hb * ha * log h) in all.
HullFit fit_hull_points(const std::vector<Pt>& hb, const std::vector<Pt>& ha) {
  HullFit f;
  f.hull_below = hb.size(), f.hull_above = ha.size();
  if (!bounded(hb, ha)) return f;
  auto consider = [&](const Pt& p, const Pt& q) {
    if (p.x == q.x) return;
    Line l = p.x < q.x ? Line{p, q} : Line{q, p};
    if (!feasible_line(l, hb, ha)) return;
    bool dup = std::any_of(f.lines.lines.begin(), f.lines.lines.end(), [&](const Line& o) { return same_line(o, l); });
    if (!dup) f.lines.lines.push_back(l);
  };
  for (size_t i = 0; i + 1 < hb.size(); ++i) consider(hb[i], hb[i + 1]);
  for (size_t i = 0; i + 1 < ha.size(); ++i) consider(ha[i], ha[i + 1]);
  for (const Pt& p : hb)
    for (const Pt& q : ha) consider(p, q);
  if (f.lines.lines.empty()) {
    f.status = HullStatus::Infeasible;
    return f;
  }
  f.status = HullStatus::Feasible;
  f.lines.find_extremes();
  return f;
}

HullFit fit_hulls(const std::vector<Pt>& below, const std::vector<Pt>& above) {
  return fit_hull_points(upper_hull(below), lower_hull(above));
}

namespace {

struct Tagged {
  Pt p;
  bool below;
};

// pts is ordered by x: the hulls are built in one pass, O(e - s).
HullFit fit_range(const std::vector<Tagged>& pts, size_t s, size_t e) {
  PairHulls h;
  for (size_t i = s; i < e; ++i) (pts[i].below ? h.below : h.above).push(pts[i].p);
  return fit_hull_points(h.below.points(), h.above.points());
}

bool not_crossing(const std::vector<Tagged>& pts, size_t s, size_t e) {
  return fit_range(pts, s, e).status != HullStatus::Infeasible;
}

}  // namespace

HullSync hull_sync(const Constraints& c) {
  std::vector<Tagged> pts;
  for (const Pt& p : c.below) pts.push_back({p, true});
  for (const Pt& p : c.above) pts.push_back({p, false});
  std::stable_sort(pts.begin(), pts.end(), [](const Tagged& a, const Tagged& b) { return a.p.x < b.p.x; });
  HullSync h;
  size_t n = pts.size(), s = 0;
  auto add = [&](size_t a, size_t b, bool transition) {
    if (a < b) h.segments.push_back({pts[a].p.x, pts[b - 1].p.x, b - a, fit_range(pts, a, b), transition});
  };
  // Greedy maximal prefixes: feasibility only shrinks as points are added, so a
  // binary search finds where each sub-interval must end.
  while (s < n) {
    size_t e = n;
    if (!not_crossing(pts, s, n)) {
      size_t ok = s + 1, bad = n;
      while (bad - ok > 1) {
        size_t mid = ok + (bad - ok) / 2;
        (not_crossing(pts, s, mid) ? ok : bad) = mid;
      }
      e = ok;
    }
    size_t b = e;
    if (e < n) {
      // Smallest b with [b, e] feasible: [s, e] is not, so b > s.
      size_t bad = s, ok = e;
      while (ok - bad > 1) {
        size_t mid = bad + (ok - bad) / 2;
        (not_crossing(pts, mid, e + 1) ? ok : bad) = mid;
      }
      b = ok;
    }
    // A stable stretch or a transition too short to bound a slope alone (the
    // break's feasible run reaches back to within a point or two of s, or is a
    // point or two itself) makes one transition of [s, e): it is feasible, and
    // the whole of it is then reported as not guaranteed.
    if (b > s && e < n &&
        (fit_range(pts, s, b).status == HullStatus::Unbounded || fit_range(pts, b, e).status == HullStatus::Unbounded))
      b = s;
    add(s, b, false);
    add(b, e, true);
    s = e;
  }
  h.linear = s == 0 || h.segments.size() == 1;
  std::vector<PiecewiseRelation::Piece> pieces;
  for (size_t k = 0; k < h.segments.size(); ++k) {
    HullSegment& seg = h.segments[k];
    if (seg.fit.status != HullStatus::Feasible) {
      h.problem = fmt::format("sub-interval {} of {} (x {}..{}, {} constraints) is {}", k + 1, h.segments.size(),
                              seg.x_first, seg.x_last, seg.points, to_string(seg.fit.status));
      break;
    }
    // The boundary between two pieces: halfway between their constraint ranges.
    int64_t from = k == 0 ? 0 : h.segments[k - 1].x_last + (seg.x_first - h.segments[k - 1].x_last) / 2;
    if (k > 0) {
      seg.apply_from = from;
      h.segments[k - 1].apply_to = from - 1;
    }
    pieces.push_back({from, seg.fit.lines});
  }
  if (h.segments.empty()) h.problem = "no constraints";
  if (h.problem.empty()) h.relation = std::make_shared<PiecewiseRelation>(std::move(pieces));
  return h;
}

std::vector<std::pair<int64_t, int64_t>> HullSync::transitions() const {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (const HullSegment& s : segments)
    if (s.transition) r.push_back({s.apply_from, s.apply_to});
  return r;
}

nlohmann::json HullSync::report() const {
  nlohmann::json segs = nlohmann::json::array();
  for (const HullSegment& s : segments) {
    nlohmann::json j = {{"x_first", s.x_first},           {"x_last", s.x_last},
                        {"constraints", s.points},        {"hull_below", s.fit.hull_below},
                        {"hull_above", s.fit.hull_above}, {"status", to_string(s.fit.status)},
                        {"transition", s.transition}};
    if (s.fit.status == HullStatus::Feasible) {
      j["vertices"] = s.fit.lines.lines.size();
      Bound mid = s.fit.lines.at(s.x_first + (s.x_last - s.x_first) / 2);
      j["width_mid_ticks"] = mid.width();
    }
    segs.push_back(j);
  }
  nlohmann::json r = {{"linear", linear}, {"segments", segs}};
  if (!linear) {
    r["nonlinear"] = fmt::format(
        "hulls cross: clocks not linear over the span, split into {} sub-intervals ({} of "
        "them transitions where the bound is not guaranteed)",
        segments.size(), transitions().size());
    r["transitions"] = transitions();
  }
  if (!problem.empty()) r["problem"] = problem;
  return r;
}

}  // namespace cptrace
