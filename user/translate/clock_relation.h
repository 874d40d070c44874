// A bounded relation between two nodes' clocks: which instants of the "to" clock an
// instant of the "from" clock can correspond to, and how a duration measured on the
// "from" clock stretches on the "to" clock. Both synchronization methods produce one
// (ratio_sync.h, hull_sync.h); translation composes and intersects them.
//
// Representation shared by both methods: the set of feasible clock lines
// y = f(x) (x on the from-clock, y on the to-clock) is a convex polygon in
// (offset, slope) space; a relation keeps its VERTICES, each a line through two
// integer points. The bound at any instant x is then exactly
//     [min over vertex lines of line(x), max over vertex lines of line(x)]
// (a linear function over a convex polygon is extreme at a vertex), and the rate
// bound is [min slope, max slope] over the vertices. Everything is evaluated in
// 128-bit integers with floor/ceil, so a bound is never understated by rounding.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct Pt {
  int64_t x = 0, y = 0;
  bool operator==(const Pt&) const = default;
};

// The line through a and b, a.x < b.x.
struct Line {
  Pt a, b;
  int64_t floor_at(int64_t x) const;
  int64_t ceil_at(int64_t x) const;
  // The same from a guess a few ticks off: a 128-bit multiplication per step
  // instead of a 128-bit division (falls back to the division when far off).
  int64_t floor_near(int64_t x, int64_t guess) const;
  int64_t ceil_near(int64_t x, int64_t guess) const;
  // Exact slope comparison: <0, 0, >0 as this slope is below, equal, above o's.
  int cmp_slope(const Line& o) const;
  bool operator==(const Line&) const = default;
};

// [lo, hi] with a point estimate est inside it (ticks of the target clock).
struct Bound {
  int64_t lo = 0, est = 0, hi = 0;
  int64_t width() const { return hi - lo; }
  bool contains(long double v) const { return v >= (long double)lo && v <= (long double)hi; }
};

// floor/ceil of d * dy / dx for dx > 0, exact.
int64_t mul_div_floor(int64_t d, int64_t dy, int64_t dx);
int64_t mul_div_ceil(int64_t d, int64_t dy, int64_t dx);

// The vertices of a bounded, non-empty feasible polygon.
struct LineSet {
  std::vector<Line> lines;
  size_t min_slope = 0, max_slope = 0;  // indices of the extreme lines
  // Screening coefficients (find_extremes): line i at x is about
  // y0 + icpt[i] + slope[i] * (x - x0) in doubles, to choose the few lines worth
  // an exact evaluation; err_c + err_d * |x - x0| bounds that approximation's error.
  int64_t x0 = 0, y0 = 0;
  std::vector<double> icpt, slope;
  double err_c = 0, err_d = 0;

  // Computes min_slope/max_slope and the screening coefficients from lines
  // (non-empty); call again after changing lines.
  void find_extremes();
  // Screening: line i at x where d = double(x - x0), relative to y0, and a bound on
  // that value's error; exact floor/ceil of line i at x from that value.
  double approx(size_t i, double d) const { return icpt[i] + slope[i] * d; }
  double error(double d) const { return err_c + err_d * (d < 0 ? -d : d); }
  int64_t floor_from(size_t i, int64_t x, double v) const;
  int64_t ceil_from(size_t i, int64_t x, double v) const;
  // The bisector estimate from the screened values of the extreme-slope lines.
  int64_t est_from(double v_min_slope, double v_max_slope) const;
  // Exact bound at x; est is the mean of the two extreme lines (the bisector
  // estimate, always feasible since the polygon is convex).
  Bound at(int64_t x) const;
  // A duration interval [lo, hi] on the from-clock, stretched by every feasible
  // rate; est scales d_est by the mean of the extreme slopes.
  Bound scale(const Bound& d) const;
  nlohmann::json to_json() const;
  static LineSet from_json(const nlohmann::json& j);
};

// Which lines give a relation's at(x) for every x of a range [u, w], found only
// where the screening proves it (no crossing of the lines that matter inside,
// with margin): then at(x) is floor of one line, ceil of another and the
// estimate of one set, and Decision::at(x) equals Relation::at(x) exactly.
struct Decision {
  const LineSet* lo_set = nullptr;
  size_t lo_line = 0;
  const LineSet* hi_set = nullptr;
  size_t hi_line = 0;
  const LineSet* est_set = nullptr;
  Bound at(int64_t x) const;
};

// Maps from-clock instants and durations to the to-clock.
class Relation {
 public:
  virtual ~Relation() = default;
  virtual Bound at(int64_t x) const = 0;
  // d is a duration in from-ticks (an interval, est inside) taken around instant x.
  virtual Bound scale(const Bound& d, int64_t x) const = 0;
  virtual nlohmann::json to_json() const = 0;
  // The line set that gives at(x), when there is one (a piecewise relation).
  virtual const LineSet* lines_at(int64_t) const { return nullptr; }
  // The lines that decide at(x) over all of [u, w], when that is proven; false
  // leaves d unspecified (then call at()).
  virtual bool decide(int64_t, int64_t, Decision&) const { return false; }
};
using RelationPtr = std::shared_ptr<const Relation>;

// One or more linear pieces; piece k applies from x_from[k] (the first from
// minus infinity) to the next piece's start. More than one piece only when the
// hull method found the clocks non-linear over the span.
class PiecewiseRelation : public Relation {
 public:
  struct Piece {
    int64_t x_from = 0;
    LineSet lines;
  };
  explicit PiecewiseRelation(std::vector<Piece> pieces);
  Bound at(int64_t x) const override;
  Bound scale(const Bound& d, int64_t x) const override;
  nlohmann::json to_json() const override;
  const LineSet* lines_at(int64_t x) const override { return &piece(x); }
  bool decide(int64_t u, int64_t w, Decision& d) const override;
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  const LineSet& piece(int64_t x) const;
  std::vector<Piece> pieces_;
};

// first (A->B) then second (B->C): bounds accumulated conservatively, using that
// every feasible map is increasing (positive slopes).
class ComposedRelation : public Relation {
 public:
  ComposedRelation(RelationPtr first, RelationPtr second) : a_(std::move(first)), b_(std::move(second)) {}
  Bound at(int64_t x) const override;
  Bound scale(const Bound& d, int64_t x) const override;
  nlohmann::json to_json() const override;

 private:
  RelationPtr a_, b_;
};

// Two relations that both hold (different methods over the same pair): the
// intersection of their bounds. An empty intersection means an assumption is
// violated; it is reported by throwing, never hidden.
class IntersectRelation : public Relation {
 public:
  IntersectRelation(RelationPtr a, RelationPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  Bound at(int64_t x) const override;
  bool decide(int64_t u, int64_t w, Decision& d) const override;
  Bound scale(const Bound& d, int64_t x) const override;
  nlohmann::json to_json() const override;

 private:
  RelationPtr a_, b_;
};

// The identity (the reference node onto itself).
class IdentityRelation : public Relation {
 public:
  Bound at(int64_t x) const override { return {x, x, x}; }
  Bound scale(const Bound& d, int64_t) const override { return d; }
  nlohmann::json to_json() const override { return {{"type", "identity"}}; }
};

RelationPtr relation_from_json(const nlohmann::json& j);
// Intersection of two bounds; throws std::runtime_error naming `what` when empty.
Bound intersect(const Bound& a, const Bound& b, const char* what);

}  // namespace cptrace
