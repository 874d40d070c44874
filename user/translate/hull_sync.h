// Convex-hull clock synchronization (Poirier, Roy & Dagenais): every message is a
// causality constraint (sync_pairs.h). With x on the from-clock and y on the
// to-clock, feasible lines lie above the UPPER hull of the `below` points and
// under the LOWER hull of the `above` points (Poirier et al. plot the transposed
// axes, where these are the lower hull of A->B and the upper hull of B->A). The
// feasible lines form a convex polygon in (offset, slope) space; its vertices (a
// LineSet) give the two extreme lines (min/max slope), the bisector estimate and
// the exact bound at every instant, piecewise linear over the hull points.
//
// Hulls that cross (no feasible line) mean the clocks are not linear over the
// span: the span is split greedily (left to right) into maximal sub-intervals that
// each admit a line, and the result says so; nothing falls back silently. Where
// sub-interval k breaks (at constraint e), the longest feasible run ending at e
// starts at some b: the change lies in [b, e), which becomes a "transition"
// piece of its own, so that the pieces around it are fitted only to constraints
// on one side of the change. A stretch before [b, e) too short to bound a line on
// its own joins the transition rather than leave the whole relation unbounded.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"
#include "translate/sync_pairs.h"

namespace cptrace {

// Upper (lower) convex hull, left to right; at equal x only the highest (lowest)
// point counts. Exact (128-bit orientation tests).
std::vector<Pt> upper_hull(std::vector<Pt> pts);
std::vector<Pt> lower_hull(std::vector<Pt> pts);

enum class HullStatus { Feasible, Infeasible, Unbounded };
const char* to_string(HullStatus s);

struct HullFit {
  HullStatus status = HullStatus::Unbounded;
  LineSet lines;  // when Feasible
  size_t hull_below = 0, hull_above = 0;
};
// Unbounded: too few constraints to bound the slope (e.g. messages in one
// direction only, or all of one direction's messages left of the other's).
HullFit fit_hulls(const std::vector<Pt>& below, const std::vector<Pt>& above);
// The same from the hulls themselves (upper hull of below, lower hull of above,
// each left to right, as upper_hull/lower_hull or IncrementalHull give them).
HullFit fit_hull_points(const std::vector<Pt>& hb, const std::vector<Pt>& ha);

struct HullSegment {
  int64_t x_first = 0, x_last = 0;  // from-clock range of its constraint points
  size_t points = 0;
  HullFit fit;
  // The constraints between the last linear stretch before a break and the
  // constraint that broke it: the change of rate lies somewhere in here, so a
  // bound for an instant in this range is NOT guaranteed (reported as such).
  bool transition = false;
  // The from-clock range this piece's bound applies to: up to halfway to the
  // neighbouring pieces' constraints (open-ended at both ends of the span).
  int64_t apply_from = INT64_MIN, apply_to = INT64_MAX;
};

struct HullSync {
  bool linear = false;  // one segment covers every constraint
  std::vector<HullSegment> segments;  // in x order
  RelationPtr relation;  // null when some segment cannot be bounded
  std::string problem;  // why relation is null ("" otherwise)
  // From-clock ranges where a transition piece applies (bounds not guaranteed).
  std::vector<std::pair<int64_t, int64_t>> transitions() const;
  nlohmann::json report() const;
};

HullSync hull_sync(const Constraints& c);

}  // namespace cptrace
