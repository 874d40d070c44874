// Rate-bounded clock relation over causality constraints (see drift_bound.h).
#include "translate/drift_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {
namespace {

using i128 = __int128;
constexpr int64_t kDen = 1000000000;

i128 floor_div(i128 n, i128 d) {
  i128 q = n / d;
  return (n % d != 0 && n < 0) ? q - 1 : q;
}
i128 ceil_div(i128 n, i128 d) { return -floor_div(-n, d); }

int64_t narrow(i128 v) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
    throw std::overflow_error("drift-bounded relation: value beyond 64 bits");
  return int64_t(v);
}

// y * 1e9 - x * rate_num: the key compared along a family (rate = rate_num / 1e9).
i128 key(const Pt& p, int64_t rate_num) { return i128(p.y) * kDen - i128(p.x) * rate_num; }

// Points whose key is a strict running extreme (max or min), scanning left to right
// (from_left) or right to left; returned sorted by x.
std::vector<Pt> records(const std::vector<Pt>& pts, int64_t rate_num, bool max, bool from_left) {
  std::vector<Pt> out;
  bool have = false;
  i128 best = 0;
  auto visit = [&](const Pt& p) {
    i128 k = key(p, rate_num);
    if (!have || (max ? k > best : k < best)) {
      out.push_back(p);
      best = k;
      have = true;
    }
  };
  if (from_left)
    for (const Pt& p : pts) visit(p);
  else
    for (auto it = pts.rbegin(); it != pts.rend(); ++it) visit(*it);
  if (!from_left) std::reverse(out.begin(), out.end());
  return out;
}

// Last point with x <= q, or null.
const Pt* last_at_or_before(const std::vector<Pt>& v, int64_t q) {
  auto it = std::upper_bound(v.begin(), v.end(), q, [](int64_t a, const Pt& p) { return a < p.x; });
  return it == v.begin() ? nullptr : &*(it - 1);
}
// First point with x > q (strictly after), or null.
const Pt* first_after(const std::vector<Pt>& v, int64_t q) {
  auto it = std::upper_bound(v.begin(), v.end(), q, [](int64_t a, const Pt& p) { return a < p.x; });
  return it == v.end() ? nullptr : &*it;
}

nlohmann::json pts_json(const std::vector<Pt>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const Pt& p : v) a.push_back({p.x, p.y});
  return a;
}
std::vector<Pt> pts_from(const nlohmann::json& a) {
  std::vector<Pt> v;
  for (const auto& p : a) v.push_back({p.at(0).get<int64_t>(), p.at(1).get<int64_t>()});
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i].x < v[i - 1].x) throw std::runtime_error("drift relation: points out of order");
  return v;
}

// A frequency in millihertz: exact integers for the ratio, far finer than any
// calibration of a TSC.
i128 millihertz(double hz, const char* which) {
  if (!std::isfinite(hz) || hz < 1 || hz > 1e13)
    throw std::invalid_argument(fmt::format("drift-bounded relation: {} TSC frequency {} Hz", which, hz));
  return i128(std::llround(hz * 1000));
}

}  // namespace

DriftRates drift_rates(int64_t rho, double from_hz, double to_hz) {
  if (rho <= 0 || rho > kDen / 10)
    throw std::invalid_argument(fmt::format("max drift {} ppb: must be in (0, 1e8]", rho));
  const i128 from = millihertz(from_hz, "from-node"), to = millihertz(to_hz, "to-node");
  if (to * 1000 < from || to > from * 1000)
    throw std::invalid_argument(
        fmt::format("drift-bounded relation: TSC frequency ratio {} / {} outside [1e-3, 1e3]", to_hz, from_hz));
  // k (1 -+ rho) * 1e9 = to (1e9 -+ rho) / from.
  return {narrow(floor_div(to * (kDen - rho), from)), narrow(ceil_div(to * (kDen + rho), from))};
}

double nominal_tsc_hz(const nlohmann::json& meta, const ClockMap& map) {
  auto it = meta.find("tsc_hz");
  if (it != meta.end() && it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() > 0)
    return it->get<double>();
  // To the kHz, as the kernel's tsc_khz: the slope moves by parts per billion as
  // points arrive, and the live view rebounds everything when k moves.
  const double hz = map.tsc_hz();
  return hz >= 1000 && std::isfinite(hz) ? std::round(hz / 1000) * 1000 : 0;
}

std::string unknown_tsc_hz_error(const std::string& node) {
  return fmt::format(
      "{}: TSC frequency unknown (meta.json has no tsc_hz and the clock stream fewer than two points): the "
      "piecewise clock model needs every node's nominal frequency, a bound between nodes that tick at different "
      "rates would be false without it",
      node);
}

DriftBoundRelation::DriftBoundRelation(const Constraints& c, int64_t max_drift_ppb, double from_hz, double to_hz)
    : rho_(max_drift_ppb), rates_(drift_rates(max_drift_ppb, from_hz, to_hz)), from_hz_(from_hz), to_hz_(to_hz) {
  build(c.below, c.above);
}

void DriftBoundRelation::build(std::vector<Pt> below, std::vector<Pt> above) {
  auto by_x = [](const Pt& a, const Pt& b) { return a.x < b.x; };
  std::stable_sort(below.begin(), below.end(), by_x);
  std::stable_sort(above.begin(), above.end(), by_x);
  below_left_ = records(below, rates_.lo, true, true);
  below_right_ = records(below, rates_.hi, true, false);
  above_right_ = records(above, rates_.lo, false, false);
  above_left_ = records(above, rates_.hi, false, true);
}

size_t DriftBoundRelation::kept() const {
  return below_left_.size() + below_right_.size() + above_left_.size() + above_right_.size();
}

namespace {

// The first index where the two families' kept points differ (their common length if none).
size_t common_prefix(const std::vector<Pt>& a, const std::vector<Pt>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k].x == b[k].x && a[k].y == b[k].y) ++k;
  return k;
}

// Lookups by last_at_or_before(v, y) (or of y - 1) agree for y below this.
int64_t left_same_below(const std::vector<Pt>& a, const std::vector<Pt>& b) {
  size_t k = common_prefix(a, b);
  int64_t x = std::numeric_limits<int64_t>::max();
  if (k < a.size()) x = std::min(x, a[k].x);
  if (k < b.size()) x = std::min(x, b[k].x);
  return x;
}

// Lookups by first_after(v, y) (or of y - 1) agree for y below this: the first
// point after y is then one of the common prefix.
int64_t right_same_below(const std::vector<Pt>& a, const std::vector<Pt>& b) {
  size_t k = common_prefix(a, b);
  if (k == a.size() && k == b.size()) return std::numeric_limits<int64_t>::max();
  return k == 0 ? std::numeric_limits<int64_t>::min() : a[k - 1].x;
}

}  // namespace

int64_t DriftBoundRelation::same_below(const DriftBoundRelation& older) const {
  // Another rate interval keeps other points and scales otherwise (k moved, or rho).
  if (rates_.lo != older.rates_.lo || rates_.hi != older.rates_.hi) return std::numeric_limits<int64_t>::min();
  return std::min({left_same_below(below_left_, older.below_left_), left_same_below(above_left_, older.above_left_),
                   right_same_below(below_right_, older.below_right_),
                   right_same_below(above_right_, older.above_right_)});
}

Bound DriftBoundRelation::at(int64_t x) const {
  if (!bounded()) throw std::runtime_error("drift-bounded relation without constraints on both sides");
  const int64_t rlo = rates_.lo, rhi = rates_.hi;
  i128 lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (const Pt* p = last_at_or_before(below_left_, x)) lo = std::max(lo, p->y + floor_div(i128(x - p->x) * rlo, kDen));
  if (const Pt* p = first_after(below_right_, x)) lo = std::max(lo, p->y - ceil_div(i128(p->x - x) * rhi, kDen));
  if (const Pt* p = first_after(above_right_, x - 1)) hi = std::min(hi, p->y - floor_div(i128(p->x - x) * rlo, kDen));
  if (const Pt* p = last_at_or_before(above_left_, x - 1))
    hi = std::min(hi, p->y + ceil_div(i128(x - p->x) * rhi, kDen));
  if (lo > hi)
    throw std::runtime_error(fmt::format(
        "drift-bounded relation: empty at {} ([{}, {}]): a constraint violates "
        "causality or the rate leaves [{}, {}] (the nominal ratio +-{} ppm)",
        x, int64_t(lo), int64_t(hi), double(rates_.lo) / kDen, double(rates_.hi) / kDen, double(rho_) / 1000));
  Bound b{narrow(lo), 0, narrow(hi)};
  b.est = b.lo + (b.hi - b.lo) / 2;
  return b;
}

Bound DriftBoundRelation::scale(const Bound& d, int64_t) const {
  const int64_t rlo = rates_.lo, rhi = rates_.hi;
  auto f = [&](int64_t v, int64_t r, bool up) {
    return narrow(up ? ceil_div(i128(v) * r, kDen) : floor_div(i128(v) * r, kDen));
  };
  // The estimate at the middle rate (k, up to the rounding of lo and hi).
  const int64_t est = narrow(floor_div(i128(d.est) * (i128(rlo) + rhi) + kDen, 2 * i128(kDen)));
  Bound r{std::min(f(d.lo, rlo, false), f(d.lo, rhi, false)), est, std::max(f(d.hi, rlo, true), f(d.hi, rhi, true))};
  r.est = std::clamp(r.est, r.lo, r.hi);
  return r;
}

nlohmann::json DriftBoundRelation::to_json() const {
  nlohmann::json j = {{"type", "drift"},
                      {"max_drift_ppb", rho_},
                      {"rate_lo", rates_.lo},
                      {"rate_hi", rates_.hi},
                      {"below_left", pts_json(below_left_)},
                      {"below_right", pts_json(below_right_)},
                      {"above_left", pts_json(above_left_)},
                      {"above_right", pts_json(above_right_)}};
  if (from_hz_ > 0) j["nominal_hz"] = {{"from", from_hz_}, {"to", to_hz_}};
  return j;
}

RelationPtr DriftBoundRelation::from_json(const nlohmann::json& j) {
  auto r = std::shared_ptr<DriftBoundRelation>(new DriftBoundRelation());
  r->rho_ = j.at("max_drift_ppb").get<int64_t>();
  if (r->rho_ <= 0 || r->rho_ > kDen / 10) throw std::runtime_error("drift relation: bad max_drift_ppb");
  // Files written before the nominal ratio was taken into account: k = 1.
  r->rates_ = {j.value("rate_lo", kDen - r->rho_), j.value("rate_hi", kDen + r->rho_)};
  if (r->rates_.lo <= 0 || r->rates_.hi < r->rates_.lo) throw std::runtime_error("drift relation: bad rate_lo/rate_hi");
  if (j.contains("nominal_hz")) {
    r->from_hz_ = j["nominal_hz"].value("from", 0.0);
    r->to_hz_ = j["nominal_hz"].value("to", 0.0);
  }
  r->below_left_ = pts_from(j.at("below_left"));
  r->below_right_ = pts_from(j.at("below_right"));
  r->above_left_ = pts_from(j.at("above_left"));
  r->above_right_ = pts_from(j.at("above_right"));
  if (!r->bounded()) throw std::runtime_error("drift relation without constraints on both sides");
  return r;
}

}  // namespace cptrace
