// A clock relation for clocks that are NOT linear over the span (rate changes,
// any number of them, anywhere), under a weaker assumption than the hull's: the
// rate of the "to" clock against the "from" clock, in TSC ticks per tick, stays
// within [k (1 - rho), k (1 + rho)], where k = hz_to / hz_from is the ratio of the
// two nodes' nominal TSC frequencies (a 2.8 GHz node ticks 1.333 times per tick of
// a 2.1 GHz one) and rho = --max-drift-ppm covers both the error of those nominal
// frequencies and the real drift (docs/sync-translate.md). With causality
// constraints (sync_pairs.h: rounds and matched packets) the true map f then
// satisfies, for every x, with lo = k (1 - rho) and hi = k (1 + rho),
//   f(x) >= y_b + (x - x_b) lo   for a below point (x_b, y_b) left of x,
//   f(x) >= y_b - (x_b - x) hi   for one right of x,
//   f(x) <= y_a - (x_a - x) lo   for an above point right of x,
//   f(x) <= y_a + (x - x_a) hi   for one left of x,
// and the bound at x is the tightest of these: where packets flow both ways it stays
// near the sum of the local one-way delays whatever the rates did; between sparse
// constraints (rounds only at start and stop) it widens by 2 k rho per tick away.
//
// Only the constraints that are the tightest for some x are kept (each of the four
// families is a running maximum/minimum of y - rate * x): for clock data that is one
// point per rho-limited stretch, not one per packet, so the relation stays small.
// Exact integer arithmetic (rho in ppb, the rates lo and hi in units of 1e-9,
// lo rounded down and hi up), rounded outward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_map.h"
#include "translate/clock_relation.h"
#include "translate/sync_pairs.h"

namespace cptrace {

// The rate interval [k (1 - rho), k (1 + rho)], k = to_hz / from_hz, in units of
// 1e-9 (lo rounded down, hi up; the frequencies taken to the millihertz). Throws
// std::invalid_argument for rho outside (0, 1e8] ppb, a frequency that is not a
// positive finite number, or a ratio outside [1e-3, 1e3].
struct DriftRates {
  int64_t lo = 0, hi = 0;
};
DriftRates drift_rates(int64_t max_drift_ppb, double from_hz, double to_hz);

// A node's nominal TSC frequency (ticks per second), the one k is taken from:
// meta.json "tsc_hz" (what the recorder writes when it stops: the slope of its
// correlation stream, TSC against CLOCK_MONOTONIC_RAW), else the same slope over
// the stream read so far (a recording still running or killed) rounded to the
// kHz (0.4 ppm at 2.5 GHz: it stays the same from one refresh of the live view to
// the next); 0 when neither is known (no tsc_hz, fewer than two points).
double nominal_tsc_hz(const nlohmann::json& meta, const ClockMap& map);
// The error for a node whose nominal frequency is unknown: the piecewise model
// would otherwise give bounds that are false for nodes at different frequencies.
std::string unknown_tsc_hz_error(const std::string& node);

class DriftBoundRelation : public Relation {
 public:
  // c's points in any order (x on the from-clock, y on the to-clock). max_drift_ppb
  // and the two nodes' nominal TSC frequencies as drift_rates() takes them.
  DriftBoundRelation(const Constraints& c, int64_t max_drift_ppb, double from_hz, double to_hz);
  // Both sides constrained (a below and an above point): otherwise at() is unbounded.
  bool bounded() const { return !below_left_.empty() && !above_left_.empty(); }
  Bound at(int64_t x) const override;
  // A duration d on the from-clock lasts [d lo, d hi] on the to-clock.
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
  DriftRates rates() const { return rates_; }

 private:
  DriftBoundRelation() = default;
  int64_t rho_ = 0;
  DriftRates rates_;
  double from_hz_ = 0, to_hz_ = 0;  // for the report only (0: a file without them)
  // Sorted by x. below_left_: the running maxima of y - lo x from the left;
  // below_right_: of y - hi x from the right; above_right_: running minima of
  // y - lo x from the right; above_left_: of y - hi x from the left.
  std::vector<Pt> below_left_, below_right_, above_left_, above_right_;
  void build(std::vector<Pt> below, std::vector<Pt> above);
};

}  // namespace cptrace
