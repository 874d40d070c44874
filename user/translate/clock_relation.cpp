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

i128 line_num(const Line& l, int64_t x) { return i128(l.b.y - l.a.y) * (i128(x) - l.a.x); }

Bound clamp_est(Bound b) {
  b.est = std::clamp(b.est, b.lo, b.hi);
  return b;
}

}  // namespace

int64_t mul_div_floor(int64_t d, int64_t dy, int64_t dx) { return narrow(floor_div(i128(d) * dy, dx)); }
int64_t mul_div_ceil(int64_t d, int64_t dy, int64_t dx) { return narrow(ceil_div(i128(d) * dy, dx)); }

int64_t Line::floor_at(int64_t x) const { return narrow(a.y + floor_div(line_num(*this, x), i128(b.x) - a.x)); }
int64_t Line::ceil_at(int64_t x) const { return narrow(a.y + ceil_div(line_num(*this, x), i128(b.x) - a.x)); }

double Line::approx_at(int64_t x, int64_t y0) const {
  double slope = double(b.y - a.y) / double(b.x - a.x);
  return double(a.y - y0) + slope * double(x - a.x);
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
}

// Screens every vertex line in double precision, then evaluates exactly those that
// could be the extreme (within 4 ticks of the screened extreme: the screening error
// is far below one tick), so the result is the exact floor/ceil envelope.
namespace {

// Every line of a set evaluated at x in doubles, relative to y0 (error << 1
// tick): only the lines within a few ticks of the extremes are then evaluated
// exactly, and an intersection of two sets (IntersectRelation) only evaluates
// the set that decides each side.
class Screened {
 public:
  Screened(const LineSet& s, int64_t x) : s_(s), x_(x), y0_(s.lines[0].a.y) {
    if (s.lines.size() > kStack) heap_.resize(s.lines.size()), v_ = heap_.data();
    for (size_t i = 0; i < s.lines.size(); ++i) {
      v_[i] = s.lines[i].approx_at(x, y0_);
      amin_ = std::min(amin_, v_[i]), amax_ = std::max(amax_, v_[i]);
    }
  }
  int64_t lo() const {
    int64_t lo = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < s_.lines.size(); ++i)
      if (v_[i] <= amin_ + 4) lo = std::min(lo, s_.lines[i].floor_at(x_));
    return lo;
  }
  int64_t hi() const {
    int64_t hi = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < s_.lines.size(); ++i)
      if (v_[i] >= amax_ - 4) hi = std::max(hi, s_.lines[i].ceil_at(x_));
    return hi;
  }
  // The estimate needs no exactness, only to lie inside: rounded (then clamped).
  int64_t est() const { return y0_ + int64_t(std::llround((v_[s_.min_slope] + v_[s_.max_slope]) / 2)); }
  // Approximate absolute bound and width, for comparing two sets.
  long double lo_approx() const { return (long double)y0_ + amin_; }
  long double hi_approx() const { return (long double)y0_ + amax_; }
  double width_approx() const { return amax_ - amin_; }

 private:
  static constexpr size_t kStack = 32;
  const LineSet& s_;
  int64_t x_, y0_;
  double stack_[kStack];
  std::vector<double> heap_;
  double* v_ = stack_;
  double amin_ = INFINITY, amax_ = -INFINITY;
};

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
  auto it = std::upper_bound(pieces_.begin() + 1, pieces_.end(), x,
                             [](int64_t v, const Piece& p) { return v < p.x_from; });
  return (it - 1)->lines;
}

Bound PiecewiseRelation::at(int64_t x) const { return piece(x).at(x); }
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

Bound ComposedRelation::scale(const Bound& d, int64_t x) const {
  return b_->scale(a_->scale(d, x), a_->at(x).est);
}

nlohmann::json ComposedRelation::to_json() const {
  return {{"type", "compose"}, {"first", a_->to_json()}, {"then", b_->to_json()}};
}

Bound intersect(const Bound& a, const Bound& b, const char* what) {
  Bound r{std::max(a.lo, b.lo), 0, std::min(a.hi, b.hi)};
  if (r.lo > r.hi)
    throw std::runtime_error(fmt::format("{}: the methods' bounds [{}, {}] and [{}, {}] are disjoint — a clock is "
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
  constexpr long double kMargin = 16;
  long double lo_gap = sa.lo_approx() - sb.lo_approx(), hi_gap = sa.hi_approx() - sb.hi_approx();
  double w_gap = sa.width_approx() - sb.width_approx();
  long double lo_ap = std::max(sa.lo_approx(), sb.lo_approx()), hi_ap = std::min(sa.hi_approx(), sb.hi_approx());
  if (std::fabs(lo_gap) < kMargin || std::fabs(hi_gap) < kMargin || std::fabs(w_gap) < kMargin ||
      hi_ap - lo_ap < kMargin)
    return intersect(la->at(x), lb->at(x), "instant");
  Bound r{lo_gap > 0 ? sa.lo() : sb.lo(), (w_gap <= 0 ? sa : sb).est(), hi_gap < 0 ? sa.hi() : sb.hi()};
  if (r.lo > r.hi) return intersect(la->at(x), lb->at(x), "instant");  // unreachable past the margin; throws there
  return clamp_est(r);
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
