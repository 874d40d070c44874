// Clock relations: exact line arithmetic, piecewise, composed and intersected maps.
#include "translate/clock_relation.h"

#include "translate/drift_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {
namespace {

using i128 = __int128;

i128 floor_div(i128 n, i128 d) {
  i128 q = n / d;
  if (n % d != 0 && ((n < 0) != (d < 0))) --q;
  return q;
}
i128 ceil_div(i128 n, i128 d) { return -floor_div(-n, d); }

int64_t narrow(i128 v) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
    throw std::overflow_error("clock relation: value beyond 64 bits (timestamps far outside the synchronized span?)");
  return static_cast<int64_t>(v);
}

// floor, ceil and llround of a double below 2^60 in magnitude, inline: libm's
// are calls, and these run for every translated event. Exact: below 2^52 a
// double's fraction is its difference with its truncation; above, it has none.
int64_t floor_small(double v) {
  int64_t t = int64_t(v);
  return double(t) > v ? t - 1 : t;
}
int64_t ceil_small(double v) {
  int64_t t = int64_t(v);
  return double(t) < v ? t + 1 : t;
}
int64_t llround_any(double v) {
  if (!(std::fabs(v) < 0x1p52)) return std::llround(v);  // no fraction, or beyond int64 (libm's answer)
  int64_t t = int64_t(v);
  double f = v - double(t);
  return f >= 0.5 ? t + 1 : f <= -0.5 ? t - 1 : t;  // halves away from zero
}

i128 line_num(const Line& l, int64_t x) { return i128(l.b.y - l.a.y) * (i128(x) - l.a.x); }

// A guess whose correction (at most 9 steps) stays in 64 bits; beyond, the
// division decides and narrow() reports the overflow.
bool near_representable(int64_t guess) {
  return guess > std::numeric_limits<int64_t>::min() + 9 && guess < std::numeric_limits<int64_t>::max() - 9;
}

Bound clamp_est(Bound b) {
  b.est = std::clamp(b.est, b.lo, b.hi);
  return b;
}

}  // namespace

int64_t mul_div_floor(int64_t d, int64_t dy, int64_t dx) { return narrow(floor_div(i128(d) * dy, dx)); }
int64_t mul_div_ceil(int64_t d, int64_t dy, int64_t dx) { return narrow(ceil_div(i128(d) * dy, dx)); }

int64_t Line::floor_at(int64_t x) const { return narrow(a.y + floor_div(line_num(*this, x), i128(b.x) - a.x)); }
int64_t Line::ceil_at(int64_t x) const { return narrow(a.y + ceil_div(line_num(*this, x), i128(b.x) - a.x)); }

// floor(line(x)) is q when 0 <= num - (q - a.y) * dx < dx; a guess within a few
// ticks gets there in a step or two.
int64_t Line::floor_near(int64_t x, int64_t guess) const {
  const i128 dx = i128(b.x) - a.x, r = line_num(*this, x) - (i128(guess) - a.y) * dx;
  if (r < -8 * dx || r >= 9 * dx || !near_representable(guess)) return floor_at(x);
  int64_t q = guess;
  for (i128 left = r; left < 0; left += dx) --q;
  for (i128 left = r; left >= dx; left -= dx) ++q;
  return q;
}

// ceil(line(x)) is q when 0 <= (q - a.y) * dx - num < dx.
int64_t Line::ceil_near(int64_t x, int64_t guess) const {
  const i128 dx = i128(b.x) - a.x, r = (i128(guess) - a.y) * dx - line_num(*this, x);
  if (r < -8 * dx || r >= 9 * dx || !near_representable(guess)) return ceil_at(x);
  int64_t q = guess;
  for (i128 left = r; left < 0; left += dx) ++q;
  for (i128 left = r; left >= dx; left -= dx) --q;
  return q;
}

int Line::cmp_slope(const Line& o) const {
  i128 l = i128(b.y - a.y) * (o.b.x - o.a.x), r = i128(o.b.y - o.a.y) * (b.x - a.x);
  return l < r ? -1 : l > r ? 1 : 0;
}

// ---- LineSet ------------------------------------------------------------------------

void LineSet::find_extremes() {
  if (lines.empty()) throw std::logic_error("LineSet without lines");
  min_slope = max_slope = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].cmp_slope(lines[min_slope]) < 0) min_slope = i;
    if (lines[i].cmp_slope(lines[max_slope]) > 0) max_slope = i;
  }
  // Intercepts at x0 from the exact numerator, slopes rounded once each: every
  // term below is within a few units of 2^-53 of its magnitude, so 1e-14 of the
  // magnitudes is a bound with a wide margin.
  x0 = lines[0].a.x, y0 = lines[0].a.y;
  icpt.clear(), slope.clear(), err_c = 0, err_d = 0;
  for (const Line& l : lines) {
    long double dx = (long double)(i128(l.b.x) - l.a.x);
    slope.push_back(double((long double)(l.b.y - l.a.y) / dx));
    icpt.push_back(double((long double)(l.a.y - y0) + (long double)line_num(l, x0) / dx));
    err_c = std::max(err_c, 1e-14 * (std::fabs(icpt.back()) + 1));
    err_d = std::max(err_d, 1e-14 * (std::fabs(slope.back()) + 1));
  }
}

int64_t LineSet::floor_from(size_t i, int64_t x, double v) const {
  int64_t guess;
  // Far beyond 64 bits a guess means nothing: the division decides (and throws).
  if (!(std::fabs(v) < 0x1p60) || __builtin_add_overflow(y0, floor_small(v), &guess)) return lines[i].floor_at(x);
  return lines[i].floor_near(x, guess);
}

int64_t LineSet::ceil_from(size_t i, int64_t x, double v) const {
  int64_t guess;
  if (!(std::fabs(v) < 0x1p60) || __builtin_add_overflow(y0, ceil_small(v), &guess)) return lines[i].ceil_at(x);
  return lines[i].ceil_near(x, guess);
}

// The estimate needs no exactness, only to lie inside: rounded (then clamped).
int64_t LineSet::est_from(double v_min_slope, double v_max_slope) const {
  return y0 + llround_any((v_min_slope + v_max_slope) / 2);
}

namespace {

// x - x0 as a double, false when the difference does not fit 64 bits.
bool offset_of(const LineSet& s, int64_t x, double& d) {
  int64_t diff;
  if (__builtin_sub_overflow(x, s.x0, &diff)) return false;
  d = double(diff);
  return true;
}

// Every line of a set evaluated at x in doubles, relative to the set's y0, with a
// bound on that error: only the lines that could be the extreme (within the
// error and 4 ticks of the screened extreme) are evaluated exactly, starting from
// the screened value, so the result is the exact floor/ceil envelope; an
// intersection of two sets (IntersectRelation) evaluates only the set that
// decides each side.
class Screened {
 public:
  Screened(const LineSet& s, int64_t x) : s_(s), x_(x) {
    if (s.lines.size() > kStack) {
      heap_.resize(s.lines.size());
      v_ = heap_.data();
    }
    double d = 0;
    exact_only_ = !offset_of(s, x, d);
    for (size_t i = 0; i < s.lines.size(); ++i) {
      v_[i] = s.approx(i, d);
      amin_ = std::min(amin_, v_[i]), amax_ = std::max(amax_, v_[i]);
    }
    err_ = s.error(d);
  }
  int64_t lo() const {
    int64_t lo = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < s_.lines.size(); ++i)
      if (exact_only_ || v_[i] <= amin_ + 4 + 2 * err_)
        lo = std::min(lo, exact_only_ ? s_.lines[i].floor_at(x_) : s_.floor_from(i, x_, v_[i]));
    return lo;
  }
  int64_t hi() const {
    int64_t hi = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < s_.lines.size(); ++i)
      if (exact_only_ || v_[i] >= amax_ - 4 - 2 * err_)
        hi = std::max(hi, exact_only_ ? s_.lines[i].ceil_at(x_) : s_.ceil_from(i, x_, v_[i]));
    return hi;
  }
  int64_t est() const { return s_.est_from(v_[s_.min_slope], v_[s_.max_slope]); }
  // Approximate absolute bounds, for comparing two sets, and their error.
  long double lo_approx() const { return (long double)s_.y0 + amin_; }
  long double hi_approx() const { return (long double)s_.y0 + amax_; }
  double error() const { return err_; }
  bool exact_only() const { return exact_only_; }

 private:
  static constexpr size_t kStack = 32;
  const LineSet& s_;
  int64_t x_;
  double stack_[kStack];
  std::vector<double> heap_;
  double* v_ = stack_;
  double amin_ = INFINITY, amax_ = -INFINITY, err_ = 0;
  bool exact_only_ = false;
};

// Which set gives each side of an intersection, from both sets' screened bounds
// (absolute): the higher low side, the lower high side, the estimate of the
// narrower set. False where a gap between the sides, between the widths, or the
// intersection itself is within `margin`: the screening could choose wrong there.
struct Sides {
  bool lo_from_a, hi_from_a, est_from_a;
};
bool sides_apart(long double a_lo, long double a_hi, long double b_lo, long double b_hi, long double margin, Sides& s) {
  long double lo_gap = a_lo - b_lo, hi_gap = a_hi - b_hi, w_gap = (a_hi - a_lo) - (b_hi - b_lo);
  if (std::fabs(lo_gap) < margin || std::fabs(hi_gap) < margin || std::fabs(w_gap) < margin ||
      std::min(a_hi, b_hi) - std::max(a_lo, b_lo) < margin)
    return false;
  s = {lo_gap > 0, hi_gap < 0, w_gap <= 0};
  return true;
}

// The line of s lowest (or highest) at every x of [u, w]: the one whose screened
// values at both ends are beyond every other line's by more than both errors.
// Lines are straight, so a gap positive at both ends is positive in between.
bool extreme_over(const LineSet& s, int64_t u, int64_t w, bool lowest, size_t& k) {
  double du, dw;
  if (!offset_of(s, u, du) || !offset_of(s, w, dw)) return false;
  const double sign = lowest ? 1 : -1, mu = 2 * s.error(du) + 1, mw = 2 * s.error(dw) + 1;
  k = 0;
  for (size_t i = 1; i < s.lines.size(); ++i)
    if (sign * (s.approx(k, du) - s.approx(i, du)) > 0) k = i;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    if (i == k) continue;
    if (sign * (s.approx(i, du) - s.approx(k, du)) <= mu) return false;
    if (sign * (s.approx(i, dw) - s.approx(k, dw)) <= mw) return false;
  }
  return true;
}

}  // namespace

Bound LineSet::at(int64_t x) const {
  Screened sc(*this, x);
  return clamp_est({sc.lo(), sc.est(), sc.hi()});
}

Bound LineSet::scale(const Bound& d) const {
  const Line& s1 = lines[min_slope];
  const Line& s2 = lines[max_slope];
  auto lo_of = [](int64_t v, const Line& s) { return mul_div_floor(v, s.b.y - s.a.y, s.b.x - s.a.x); };
  auto hi_of = [](int64_t v, const Line& s) { return mul_div_ceil(v, s.b.y - s.a.y, s.b.x - s.a.x); };
  Bound r;
  r.lo = std::min(lo_of(d.lo, s1), lo_of(d.lo, s2));
  r.hi = std::max(hi_of(d.hi, s1), hi_of(d.hi, s2));
  auto slope = [](const Line& s) { return (long double)(s.b.y - s.a.y) / (long double)(s.b.x - s.a.x); };
  r.est = int64_t(std::llround((long double)d.est * (slope(s1) + slope(s2)) / 2));
  return clamp_est(r);
}

nlohmann::json LineSet::to_json() const {
  nlohmann::json ls = nlohmann::json::array();
  for (const Line& l : lines) ls.push_back({l.a.x, l.a.y, l.b.x, l.b.y});
  return {{"lines", ls}, {"min_slope", min_slope}, {"max_slope", max_slope}};
}

LineSet LineSet::from_json(const nlohmann::json& j) {
  LineSet s;
  for (const auto& l : j.at("lines")) {
    Line line{{l.at(0).get<int64_t>(), l.at(1).get<int64_t>()}, {l.at(2).get<int64_t>(), l.at(3).get<int64_t>()}};
    if (line.b.x <= line.a.x) throw std::runtime_error("relation line with b.x <= a.x");
    s.lines.push_back(line);
  }
  if (s.lines.empty()) throw std::runtime_error("relation without lines");
  s.find_extremes();
  return s;
}

// ---- piecewise, composed, intersected ---------------------------------------------------

PiecewiseRelation::PiecewiseRelation(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {
  if (pieces_.empty()) throw std::logic_error("PiecewiseRelation without pieces");
}

const LineSet& PiecewiseRelation::piece(int64_t x) const {
  auto it =
      std::upper_bound(pieces_.begin() + 1, pieces_.end(), x, [](int64_t v, const Piece& p) { return v < p.x_from; });
  return (it - 1)->lines;
}

Bound PiecewiseRelation::at(int64_t x) const { return piece(x).at(x); }

bool PiecewiseRelation::decide(int64_t u, int64_t w, Decision& d) const {
  const LineSet& s = piece(u);
  if (&s != &piece(w) || !extreme_over(s, u, w, true, d.lo_line) || !extreme_over(s, u, w, false, d.hi_line))
    return false;
  d.lo_set = d.hi_set = d.est_set = &s;
  return true;
}

Bound Decision::at(int64_t x) const {
  // x lies in the range decide() checked, so these differences fit 64 bits.
  double dl = double(x - lo_set->x0), dh = double(x - hi_set->x0), de = double(x - est_set->x0);
  return clamp_est({lo_set->floor_from(lo_line, x, lo_set->approx(lo_line, dl)),
                    est_set->est_from(est_set->approx(est_set->min_slope, de), est_set->approx(est_set->max_slope, de)),
                    hi_set->ceil_from(hi_line, x, hi_set->approx(hi_line, dh))});
}
Bound PiecewiseRelation::scale(const Bound& d, int64_t x) const { return piece(x).scale(d); }

nlohmann::json PiecewiseRelation::to_json() const {
  nlohmann::json ps = nlohmann::json::array();
  for (const Piece& p : pieces_) {
    nlohmann::json j = p.lines.to_json();
    j["x_from"] = p.x_from;
    ps.push_back(j);
  }
  return {{"type", "piecewise"}, {"pieces", ps}};
}

Bound ComposedRelation::at(int64_t x) const {
  Bound p = a_->at(x);
  return clamp_est({b_->at(p.lo).lo, b_->at(p.est).est, b_->at(p.hi).hi});
}

Bound ComposedRelation::scale(const Bound& d, int64_t x) const { return b_->scale(a_->scale(d, x), a_->at(x).est); }

nlohmann::json ComposedRelation::to_json() const {
  return {{"type", "compose"}, {"first", a_->to_json()}, {"then", b_->to_json()}};
}

Bound intersect(const Bound& a, const Bound& b, const char* what) {
  Bound r{std::max(a.lo, b.lo), 0, std::min(a.hi, b.hi)};
  if (r.lo > r.hi)
    throw std::runtime_error(
        fmt::format("{}: the methods' bounds [{}, {}] and [{}, {}] are disjoint — a clock is "
                    "not linear over the span or a timestamp violates causality",
                    what, a.lo, a.hi, b.lo, b.hi));
  r.est = (a.width() <= b.width() ? a : b).est;
  return clamp_est(r);
}

// Both methods' line sets screened, each side of the intersection taken from
// the set that decides it, and both evaluated exactly wherever the screening
// cannot tell (within 16 ticks): the same result as intersect(a.at(x), b.at(x))
// with half the exact evaluations (the clamp into the intersection equals the
// clamp into the narrower set's own bound first). Runs per event of --method best.
Bound IntersectRelation::at(int64_t x) const {
  const LineSet* la = a_->lines_at(x);
  const LineSet* lb = b_->lines_at(x);
  if (!la || !lb) return intersect(a_->at(x), b_->at(x), "instant");
  Screened sa(*la, x), sb(*lb, x);
  if (sa.exact_only() || sb.exact_only()) return intersect(la->at(x), lb->at(x), "instant");
  Sides side;
  if (!sides_apart(sa.lo_approx(), sa.hi_approx(), sb.lo_approx(), sb.hi_approx(), 16 + 4 * (sa.error() + sb.error()),
                   side))
    return intersect(la->at(x), lb->at(x), "instant");
  Bound r{side.lo_from_a ? sa.lo() : sb.lo(), (side.est_from_a ? sa : sb).est(), side.hi_from_a ? sa.hi() : sb.hi()};
  if (r.lo > r.hi) return intersect(la->at(x), lb->at(x), "instant");  // unreachable past the margin; throws there
  return clamp_est(r);
}
// Proven over [u, w] when each set's extreme lines are (extreme_over) and, at
// both ends, the two sides' gaps, the widths' gap and the intersection are
// beyond at()'s margin with the same signs: all are straight lines over the
// range, so at() takes the same sides everywhere in it (directly or through its
// exact fallback, which then agrees).
bool IntersectRelation::decide(int64_t u, int64_t w, Decision& d) const {
  const LineSet* la = a_->lines_at(u);
  const LineSet* lb = b_->lines_at(u);
  if (!la || !lb || la != a_->lines_at(w) || lb != b_->lines_at(w)) return false;
  size_t alo, ahi, blo, bhi;
  if (!extreme_over(*la, u, w, true, alo) || !extreme_over(*la, u, w, false, ahi) ||
      !extreme_over(*lb, u, w, true, blo) || !extreme_over(*lb, u, w, false, bhi))
    return false;
  Sides at_end[2];
  for (int end = 0; end < 2; ++end) {
    double da, db;
    if (!offset_of(*la, end ? w : u, da) || !offset_of(*lb, end ? w : u, db)) return false;
    auto abs = [](const LineSet& s, size_t line, double d) { return (long double)s.y0 + s.approx(line, d); };
    if (!sides_apart(abs(*la, alo, da), abs(*la, ahi, da), abs(*lb, blo, db), abs(*lb, bhi, db),
                     17 + 4 * (la->error(da) + lb->error(db)), at_end[end]))
      return false;
  }
  const Sides& s = at_end[0];
  if (s.lo_from_a != at_end[1].lo_from_a || s.hi_from_a != at_end[1].hi_from_a || s.est_from_a != at_end[1].est_from_a)
    return false;
  d.lo_set = s.lo_from_a ? la : lb, d.lo_line = s.lo_from_a ? alo : blo;
  d.hi_set = s.hi_from_a ? la : lb, d.hi_line = s.hi_from_a ? ahi : bhi;
  d.est_set = s.est_from_a ? la : lb;
  return true;
}

Bound IntersectRelation::scale(const Bound& d, int64_t x) const {
  return intersect(a_->scale(d, x), b_->scale(d, x), "duration");
}
nlohmann::json IntersectRelation::to_json() const {
  return {{"type", "intersect"}, {"a", a_->to_json()}, {"b", b_->to_json()}};
}

RelationPtr relation_from_json(const nlohmann::json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "identity") return std::make_shared<IdentityRelation>();
  if (type == "drift") return DriftBoundRelation::from_json(j);
  if (type == "compose")
    return std::make_shared<ComposedRelation>(relation_from_json(j.at("first")), relation_from_json(j.at("then")));
  if (type == "intersect")
    return std::make_shared<IntersectRelation>(relation_from_json(j.at("a")), relation_from_json(j.at("b")));
  if (type == "piecewise") {
    std::vector<PiecewiseRelation::Piece> ps;
    for (const auto& p : j.at("pieces")) ps.push_back({p.at("x_from").get<int64_t>(), LineSet::from_json(p)});
    if (ps.empty()) throw std::runtime_error("piecewise relation without pieces");
    return std::make_shared<PiecewiseRelation>(std::move(ps));
  }
  throw std::runtime_error("unknown relation type \"" + type + "\"");
}

}  // namespace cptrace
