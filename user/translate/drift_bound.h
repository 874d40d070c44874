// A clock relation for clocks that are NOT linear over the span (rate changes,
// any number of them, anywhere), under a weaker assumption than the hull's: the
// rate of the "to" clock against the "from" clock stays within [1 - rho, 1 + rho]
// (rho = --max-drift-ppm). With causality constraints (sync_pairs.h: rounds and
// matched packets) the true map f then satisfies, for every x,
//   f(x) >= y_b + (x - x_b)(1 - rho)   for a below point (x_b, y_b) left of x,
//   f(x) >= y_b - (x_b - x)(1 + rho)   for one right of x,
//   f(x) <= y_a - (x_a - x)(1 - rho)   for an above point right of x,
//   f(x) <= y_a + (x - x_a)(1 + rho)   for one left of x,
// and the bound at x is the tightest of these: where packets flow both ways it stays
// near the sum of the local one-way delays whatever the rates did; between sparse
// constraints (rounds only at start and stop) it widens by 2 rho per tick away.
//
// Only the constraints that are the tightest for some x are kept (each of the four
// families is a running maximum/minimum of y - rate * x): for clock data that is one
// point per rho-limited stretch, not one per packet, so the relation stays small.
// Exact integer arithmetic (rho in ppb), rounded outward.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"
#include "translate/sync_pairs.h"

namespace cptrace {

class DriftBoundRelation : public Relation {
 public:
  // c's points in any order. max_drift_ppb in (0, 1e8].
  DriftBoundRelation(const Constraints& c, int64_t max_drift_ppb);
  // Both sides constrained (a below and an above point): otherwise at() is unbounded.
  bool bounded() const { return !below_left_.empty() && !above_left_.empty(); }
  Bound at(int64_t x) const override;
  // A duration d on the from-clock lasts [d (1 - rho), d (1 + rho)] on the to-clock.
  Bound scale(const Bound& d, int64_t x) const override;
  nlohmann::json to_json() const override;
  static RelationPtr from_json(const nlohmann::json& j);
  size_t kept() const;  // constraint points kept (for the report)
  // An x such that at(y) == older.at(y) and scale(d, y) == older.scale(d, y) for
  // every y < x (INT64_MIN: none known, INT64_MAX: the same relation), from the
  // constraints each keeps (the live view rebounds only later instants after a
  // new round, run_view.h). at(y) looks up one kept point per family: the last
  // of the left families at or before y, the first of the right families after
  // it. Where both relations keep the same first k points of a family (sorted by
  // x), a left-family lookup before the (k+1)-th point of either, and a
  // right-family lookup before the k-th, finds the same point. A round after
  // every earlier one adds itself to both left families' ends and displaces the
  // right families' points that it bounds as tightly (their running extremes
  // taken from the right), so x is usually an earlier round near the end, but it
  // can be any earlier round, the first included.
  int64_t same_below(const DriftBoundRelation& older) const;
  int64_t max_drift_ppb() const { return rho_; }

 private:
  DriftBoundRelation() = default;
  int64_t rho_ = 0;
  // Sorted by x. below_left_: the running maxima of y - (1-rho) x from the left;
  // below_right_: of y - (1+rho) x from the right; above_right_: running minima of
  // y - (1-rho) x from the right; above_left_: of y - (1+rho) x from the left.
  std::vector<Pt> below_left_, below_right_, above_left_, above_right_;
  void build(std::vector<Pt> below, std::vector<Pt> above);
};

}  // namespace cptrace
