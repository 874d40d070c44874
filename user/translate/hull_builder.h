// Incremental convex hulls for time-ordered causality constraints (hull_sync.h).
//
// Constraint points of a node pair come out of the packet matching and the MinRTT
// rounds already ordered, or nearly so, by the from-clock instant x; a monotone
// chain (Andrew) then builds the upper hull of the `below` points and the lower
// hull of the `above` points in O(1) amortized per point, keeping only the current
// hull points: memory is the hull size, not the number of points (for clock data
// the hull stays small, since the points hug two nearly parallel lines).
#pragma once
#include <cstddef>
#include <vector>

#include "translate/clock_relation.h"

namespace cptrace {

class IncrementalHull {
 public:
  // upper: the upper hull (at equal x only the highest point counts); else the lower.
  explicit IncrementalHull(bool upper) : upper_(upper) {}
  // Points must come with non-decreasing x (std::invalid_argument otherwise, naming both).
  void push(const Pt& p);
  const std::vector<Pt>& points() const { return h_; }
  size_t pushed() const { return pushed_; }
  size_t peak() const { return peak_; }  // most hull points held at once
  void clear() { h_.clear(), pushed_ = 0; }

 private:
  bool upper_;
  std::vector<Pt> h_;
  size_t pushed_ = 0, peak_ = 0;
};

// Both hulls of a node pair's constraints (x on the from-clock): the upper hull of
// the below points and the lower hull of the above points.
struct PairHulls {
  IncrementalHull below{true}, above{false};
};

}  // namespace cptrace
