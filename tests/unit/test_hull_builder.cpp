// Incremental hulls (translate/hull_builder.h) and the feasible-line fit from
// hulls (fit_hull_points): equal to the sort-based hulls and to a brute-force
// vertex search, and containing the true clock line for constraints with known truth.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "translate/hull_builder.h"
#include "translate/hull_sync.h"

namespace cptrace {
namespace {

using i128 = __int128;

std::vector<Pt> sorted(std::vector<Pt> v) {
  std::sort(v.begin(), v.end(), [](const Pt& a, const Pt& b) { return a.x < b.x; });
  return v;
}

TEST(HullBuilder, MatchesSortedMonotoneChain) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<Pt> pts;
    int n = 1 + int(rng() % 300);
    for (int i = 0; i < n; ++i) pts.push_back({int64_t(rng() % 1000), int64_t(rng() % 1000) - 500});
    pts = sorted(pts);
    IncrementalHull up(true), lo(false);
    for (const Pt& p : pts) up.push(p), lo.push(p);
    EXPECT_EQ(up.points(), upper_hull(pts));
    EXPECT_EQ(lo.points(), lower_hull(pts));
    EXPECT_EQ(up.pushed(), pts.size());
  }
}

TEST(HullBuilder, RefusesPointsOutOfOrderAndKeepsOnlyHullPoints) {
  IncrementalHull h(true);
  h.push({10, 0});
  EXPECT_THROW(h.push({9, 0}), std::invalid_argument);
  // A million points under a line: the hull stays tiny.
  IncrementalHull u(true);
  std::mt19937_64 rng(3);
  for (int64_t x = 0; x < 1000000; ++x) u.push({x * 1000, x * 1001 - int64_t(rng() % 50000)});
  EXPECT_LT(u.peak(), 200u);
}

// Brute force: every line through two hull points checked against every point.
std::vector<Line> brute_vertices(const std::vector<Pt>& hb, const std::vector<Pt>& ha) {
  auto cross = [](const Pt& o, const Pt& a, const Pt& b) {
    return i128(a.x - o.x) * (i128(b.y) - o.y) - (i128(a.y) - o.y) * (i128(b.x) - o.x);
  };
  std::vector<Pt> all = hb;
  all.insert(all.end(), ha.begin(), ha.end());
  std::vector<Line> out;
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].x == all[j].x) continue;
      Line l = all[i].x < all[j].x ? Line{all[i], all[j]} : Line{all[j], all[i]};
      bool ok = true;
      for (const Pt& r : hb) ok = ok && cross(l.a, l.b, r) <= 0;
      for (const Pt& r : ha) ok = ok && cross(l.a, l.b, r) >= 0;
      bool dup = std::any_of(out.begin(), out.end(),
                             [&](const Line& o) { return o.cmp_slope(l) == 0 && cross(o.a, o.b, l.a) == 0; });
      if (ok && !dup) out.push_back(l);
    }
  return out;
}

// Causality constraints of a true line y = 3e9 + x * (1 + 1e-4) with random
// positive delays; the fit must contain the truth and agree with brute force.
TEST(HullBuilder, FitEqualsBruteForceAndContainsTruth) {
  std::mt19937_64 rng(11);
  auto truth = [](int64_t x) { return 3000000000.0L + (long double)x * (1 + 1e-4L); };
  for (int round = 0; round < 100; ++round) {
    std::vector<Pt> below, above;
    int64_t x = 1000;
    for (int i = 0; i < 400; ++i) {
      x += 1 + int64_t(rng() % 100000);
      int64_t d = 50 + int64_t(rng() % 5000);
      if (rng() % 2)
        above.push_back({x, int64_t(std::ceil(truth(x))) + d});  // X sent at x, Y received later
      else
        below.push_back({x, int64_t(std::floor(truth(x))) - d});  // Y sent earlier, X received at x
    }
    PairHulls h;
    std::vector<std::pair<Pt, bool>> all;
    for (const Pt& p : below) all.push_back({p, true});
    for (const Pt& p : above) all.push_back({p, false});
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first.x < b.first.x; });
    for (const auto& [p, b] : all) (b ? h.below : h.above).push(p);
    HullFit f = fit_hull_points(h.below.points(), h.above.points());
    ASSERT_EQ(f.status, HullStatus::Feasible);
    std::vector<Line> brute = brute_vertices(h.below.points(), h.above.points());
    ASSERT_EQ(f.lines.lines.size(), brute.size());
    for (int64_t q = 0; q < x + 1000000; q += x / 50) {
      Bound b = f.lines.at(q);
      EXPECT_TRUE(b.contains(truth(q))) << q;
      LineSet ref;
      ref.lines = brute;
      ref.find_extremes();
      Bound r = ref.at(q);
      EXPECT_EQ(b.lo, r.lo);
      EXPECT_EQ(b.hi, r.hi);
    }
  }
}

TEST(HullBuilder, CrossingHullsAreInfeasibleOneWayIsUnbounded) {
  // Y -> X message "received" before an X -> Y one was "sent" on a line: crossing.
  EXPECT_EQ(fit_hulls({{0, 100}, {100, 200}}, {{0, 50}, {100, 150}}).status, HullStatus::Infeasible);
  EXPECT_EQ(fit_hulls({}, {{0, 50}, {100, 150}}).status, HullStatus::Unbounded);
  EXPECT_EQ(fit_hulls({{0, 0}, {100, 100}}, {{0, 10}, {100, 110}}).status, HullStatus::Feasible);
}

}  // namespace
}  // namespace cptrace
