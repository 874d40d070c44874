// Clock relations, convex hulls and the ratio method on point sets with known
// answers, and the paper's error expressions per scenario.
#include <gtest/gtest.h>

#include <random>

#include <zstd.h>

#include "latency/duration_bounds.h"
#include "translate/clock_relation.h"
#include "translate/hull_sync.h"
#include "translate/ratio_sync.h"
#include "translate/relation_cursor.h"
#include "translate/sync_pairs.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using i128 = __int128;

TEST(HullSync, UpperAndLowerHullOfKnownPoints) {
  std::vector<Pt> pts = {{0, 0}, {1, 5}, {2, 1}, {3, 6}, {4, 0}, {2, 7}, {2, -3}};
  EXPECT_EQ(upper_hull(pts), (std::vector<Pt>{{0, 0}, {1, 5}, {2, 7}, {3, 6}, {4, 0}}));
  EXPECT_EQ(lower_hull(pts), (std::vector<Pt>{{0, 0}, {2, -3}, {4, 0}}));
  // Collinear points are dropped (they never define a vertex on their own).
  EXPECT_EQ(upper_hull({{0, 0}, {1, 1}, {2, 2}}), (std::vector<Pt>{{0, 0}, {2, 2}}));
}

// Two vertical gaps [-1, 1] at x = 0 and x = 100 around y = x: the feasible lines
// are those through both gaps; the four corner lines are the vertices.
TEST(HullSync, SquareGapsKnownBoundsEverywhere) {
  HullFit f = fit_hulls({{0, -1}, {100, 99}}, {{0, 1}, {100, 101}});
  ASSERT_EQ(f.status, HullStatus::Feasible);
  EXPECT_EQ(f.lines.lines.size(), 4u);
  struct {
    int64_t x, lo, hi;
  } cases[] = {{0, -1, 1},      {50, 49, 51},      {100, 99, 101}, {150, 148, 152},
               {200, 197, 203}, {-100, -103, -97}, {25, 24, 26}};
  for (auto c : cases) {
    Bound b = f.lines.at(c.x);
    EXPECT_EQ(b.lo, c.lo) << "x=" << c.x;
    EXPECT_EQ(b.hi, c.hi) << "x=" << c.x;
    EXPECT_EQ(b.est, c.x) << "x=" << c.x;  // bisector of the extreme lines = y = x here
  }
  // Rates: slopes (98/100, 102/100); d = 1000 -> [980, 1020].
  Bound d = f.lines.scale({1000, 1000, 1000});
  EXPECT_EQ(d.lo, 980);
  EXPECT_EQ(d.hi, 1020);
}

TEST(HullSync, CrossingHullsAreInfeasibleAndOneSidedSetsUnbounded) {
  EXPECT_EQ(fit_hulls({{0, 5}, {100, 5}}, {{0, 4}, {100, 4}}).status, HullStatus::Infeasible);
  EXPECT_EQ(fit_hulls({{0, 5}, {100, 5}}, {}).status, HullStatus::Unbounded);
  // All "above" points left of all "below" points: the slope can grow without limit.
  EXPECT_EQ(fit_hulls({{100, 0}, {200, 0}}, {{0, 10}, {50, 10}}).status, HullStatus::Unbounded);
}

// Rounding: every bound is floor/ceil of the exact rational value.
TEST(HullSync, BoundsAreRoundedOutward) {
  HullFit f = fit_hulls({{0, 0}, {3, 1}}, {{0, 1}, {3, 2}});
  ASSERT_EQ(f.status, HullStatus::Feasible);
  Bound b = f.lines.at(1);  // exact envelope at x=1: [1/3 ... 4/3] -> [0, 2]
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 2);
}

// A line with TSC-sized values (1e15) and a skew of +137 ppm, random delays: the
// bound contains the true value at every probe, the estimate lies inside, and
// more constraints never widen it.
TEST(HullSync, TscMagnitudesContainTruth) {
  std::mt19937_64 rng(7);
  const long double slope = 1 + 137e-6L, off = 3.2e9L;
  const int64_t x0 = 1'000'000'000'000'000;
  auto f = [&](long double x) { return off + slope * (x - x0) + x0; };
  Constraints c;
  for (int k = 0; k < 400; ++k) {
    int64_t x = x0 + int64_t(k) * 25'000'000 + int64_t(rng() % 1000000);
    long double d1 = 150000 + rng() % 70000, d2 = 150000 + rng() % 70000;
    c.below.push_back({x, int64_t(std::floor(f(x) - d1))});
    c.above.push_back({x + 7, int64_t(std::ceil(f(x + 7) + d2))});
  }
  HullSync h = hull_sync(c);
  ASSERT_TRUE(h.linear);
  ASSERT_TRUE(h.relation);
  int64_t prev_w = INT64_MAX;
  for (int64_t x = x0 - 5'000'000'000; x < x0 + 15'000'000'000; x += 123'456'789) {
    Bound b = h.relation->at(x);
    ASSERT_TRUE(b.contains(f(x))) << "x=" << x << " lo=" << b.lo << " hi=" << b.hi;
    ASSERT_LE(b.lo, b.est);
    ASSERT_LE(b.est, b.hi);
    (void)prev_w;
  }
  Constraints half = c;
  half.below.resize(200);
  half.above.resize(200);
  HullSync h2 = hull_sync(half);
  int64_t x = x0 + 4'000'000'000;
  EXPECT_LE(h.relation->at(x).width(), h2.relation->at(x).width());
  Bound rate = h.relation->scale({1'000'000'000, 1'000'000'000, 1'000'000'000}, x);
  EXPECT_TRUE(rate.contains(1e9L * slope)) << rate.lo << " " << rate.hi;
  printf(
      "  [hull, 800 constraints, delays 60-88 us at 2.5 ticks/ns] width mid-span %lld ticks, rate bound on 1e9 "
      "ticks: %lld\n",
      (long long)h.relation->at(x).width(), (long long)rate.width());
}

// A clock whose rate changes by 200 ppm halfway: the hulls of the whole span
// cross, which is reported, and each sub-interval is linear again.
TEST(HullSync, NonLinearClockMakesHullsCrossAndIsSplit) {
  const int64_t kink = 5'000'000'000;
  auto f = [&](long double x) { return x + (x > kink ? (x - kink) * 200e-6L : 0); };
  Constraints c;
  for (int64_t x = 0; x <= 10'000'000'000; x += 50'000'000) {
    c.below.push_back({x, int64_t(std::floor(f(x))) - 100000});
    c.above.push_back({x + 10, int64_t(std::ceil(f(x + 10))) + 100000});
  }
  HullSync h = hull_sync(c);
  EXPECT_FALSE(h.linear);
  ASSERT_GE(h.segments.size(), 2u);
  for (const HullSegment& s : h.segments) EXPECT_EQ(s.fit.status, HullStatus::Feasible);
  ASSERT_TRUE(h.relation) << h.problem;
  EXPECT_NE(h.report().dump().find("hulls cross"), std::string::npos);
  // One transition piece, around the kink; everywhere else the truth is inside.
  auto tr = h.transitions();
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_LE(tr[0].first, kink);
  EXPECT_GE(tr[0].second, kink);
  int checked = 0;
  for (int64_t x = 10'000'000; x < 10'000'000'000; x += 10'000'000) {
    if (x >= tr[0].first - 50'000'000 && x <= tr[0].second + 50'000'000) continue;
    Bound b = h.relation->at(x);
    EXPECT_TRUE(b.contains(f(x))) << "x=" << x << " [" << b.lo << ", " << b.hi << "] truth " << (double)f(x);
    checked++;
  }
  printf("  [non-linear] %zu sub-intervals, transition x %lld..%lld (kink at %lld), %d instants checked outside it\n",
         h.segments.size(), (long long)tr[0].first, (long long)tr[0].second, (long long)kink, checked);
  // The whole-span fit alone says infeasible: nothing is silently fitted across.
  EXPECT_EQ(fit_hulls(c.below, c.above).status, HullStatus::Infeasible);
}

// The first constraint is tight (a packet that met no queue) and the rest loose:
// the break after the kink is then compatible with every constraint but the first,
// so the stretch before the transition is one point, which bounds no slope. It
// joins the transition instead of leaving the whole relation unbounded (seen in
// a run: "sub-interval 1 of 3 (x ..., 1 constraints) is unbounded").
TEST(HullSync, StretchTooShortToBoundJoinsItsTransition) {
  const int64_t kink = 5'000'000'000;
  auto f = [&](long double x) { return x + (x > kink ? (x - kink) * 200e-6L : 0); };
  Constraints c;
  c.below.push_back({0, int64_t(std::floor(f(0)))});
  for (int64_t x = 50'000'000; x <= 10'000'000'000; x += 50'000'000) {
    c.below.push_back({x, int64_t(std::floor(f(x))) - 100000});
    c.above.push_back({x + 10, int64_t(std::ceil(f(x + 10))) + 100000});
  }
  HullSync h = hull_sync(c);
  ASSERT_TRUE(h.relation) << h.problem;
  for (const HullSegment& s : h.segments) EXPECT_EQ(s.fit.status, HullStatus::Feasible) << s.points;
  auto tr = h.transitions();
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_LE(tr[0].first, 0);
  EXPECT_GE(tr[0].second, kink);
  for (int64_t x = tr[0].second + 1; x < 10'000'000'000; x += 10'000'000)
    ASSERT_TRUE(h.relation->at(x).contains(f(x))) << "x=" << x;
}

// ---- ratio method: the paper's error expressions ----------------------------------

// Rounds from X (initiator) to Y with the given one-way delays; X and Y clocks
// y = x + off exactly (rate 1), t2-t3 turnaround 1000 ticks.
PairRound round_at(int64_t x, int64_t off, int64_t d1, int64_t d2, const char* phase) {
  PairRound r;
  r.phase = phase, r.x_initiated = true;
  r.t1 = x, r.t2 = x + d1 + off, r.t3 = r.t2 + 1000, r.t4 = x + d1 + 1000 + d2;
  return r;
}

TEST(RatioSync, ChoosesTightestRoundsAndGivesPaperErrors) {
  const int64_t off = 5'000'000'000, D = 10'000'000'000;
  std::vector<PairRound> rs = {round_at(1'000'000, off, 300, 300, "start"), round_at(2'000'000, off, 100, 100, "start"),
                               round_at(1'000'000 + D, off, 200, 400, "stop"),
                               round_at(2'000'000 + D, off, 100, 100, "stop")};
  RatioSync s = ratio_sync(rs, "X->Y");
  EXPECT_EQ(s.j.round.t1, 2'000'000);
  EXPECT_EQ(s.m.round.t1, 2'000'000 + D);
  // MinRTT = 200 ticks -> e = r/2 = 100, plus the rate term (rate 1 here: tiny) and 2 ticks of rounding.
  EXPECT_GE(s.j.e, 100);
  EXPECT_LE(s.j.e, 103);
  int64_t e = s.j.e;
  ASSERT_EQ(s.m.e, e);
  const Relation& rel = *s.relation;
  // Reference <-> other node: +-e anywhere between the MinRTTs.
  for (int64_t x : {s.j.x, s.j.x + D / 3, s.j.x + D / 2, s.m.x}) {
    Bound b = rel.at(x);
    EXPECT_EQ(b.hi - b.est, e) << x;
    EXPECT_EQ(b.est - b.lo, e) << x;
    EXPECT_EQ(b.est, x + off);
  }
  // Beyond the span the error grows: |1-L| e + |L| e at L = 1.5 -> 2e.
  Bound out = rel.at(s.j.x + D + D / 2);
  EXPECT_EQ(out.hi - out.est, 2 * e);
  // Same non-reference node: d r +- 2 d e / D (rounded outward).
  for (int64_t d : {int64_t(1'000'000), int64_t(3'000'000'000)}) {
    Bound b = rel.scale({d, d, d}, s.j.x + D / 2);
    long double half = 2.0L * d * e / D;
    EXPECT_EQ(b.est, d);
    EXPECT_LE(b.hi - d, int64_t(std::ceil(half)));
    EXPECT_GE(b.hi - d, int64_t(std::floor(half)));
    EXPECT_LE(d - b.lo, int64_t(std::ceil(half)));
    EXPECT_GE(d - b.lo, int64_t(std::floor(half)));
  }
}

TEST(RatioSync, MissingPhasesAreNamed) {
  std::vector<PairRound> only_start = {round_at(1000, 0, 100, 100, "start")};
  try {
    ratio_sync(only_start, "B->A");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("MinRTT2 (stop)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("B->A"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ratio_sync({}, "B->A"), std::runtime_error);
}

// Two non-reference nodes: relating them directly and scaling is ~e, not the
// naive e_B + e_C of going through the reference twice.
TEST(RatioSync, RemoteRemoteDirectBeatsNaive) {
  const int64_t D = 10'000'000'000;
  auto rel = [&](int64_t off, int64_t d) {
    std::vector<PairRound> rs = {round_at(1'000'000, off, d, d, "start"), round_at(1'000'000 + D, off, d, d, "stop")};
    return ratio_sync(rs, "p");
  };
  RatioSync ba = rel(7'000'000, 100), ca = rel(-3'000'000, 100), bc = rel(10'000'000, 100);
  int64_t x = 1'000'000 + D / 2, t_c = x + 10'000'000 + 500'000;  // event on C 500000 ticks after B's
  Bound g = bc.relation->at(x);
  Bound on_c{t_c - g.hi, t_c - g.est, t_c - g.lo};
  Bound direct = ca.relation->scale(on_c, t_c);
  Bound b1 = ba.relation->at(x), b2 = ca.relation->at(t_c);
  Bound naive{b2.lo - b1.hi, b2.est - b1.est, b2.hi - b1.lo};
  EXPECT_EQ(direct.est, 500'000);
  EXPECT_TRUE(naive.contains(500'000));
  EXPECT_LT(direct.width(), naive.width());
  EXPECT_LE(direct.width(), 2 * bc.j.e + 2);  // ~ +-e (scaling 5e5 ticks adds < 1 tick)
  EXPECT_GE(naive.width(), 2 * (ba.j.e + ca.j.e));
}

// ---- relations: composition, intersection, JSON --------------------------------------

// Rounds are checked as recorded, then widened by each node's skew error: a
// responder hold (t3 - t2 = 10) shorter than twice its node's error (2 x 30)
// stays usable, with every stamp moved by its own node's error; a round out of
// order as recorded is still refused.
TEST(SyncPairs, CheckedOnRecordedStampsThenWidenedBySkew) {
  SyncRound held;
  held.peer = "Y", held.phase = "stream", held.kernel_ok = true;
  held.t1 = 1000, held.t2 = 5000, held.t3 = 5010, held.t4 = 1100;
  SyncRound backwards = held;
  backwards.t3 = 4990;  // replied before the request arrived, as recorded
  SyncRound other = held;
  other.peer = "Z";
  std::vector<SyncRound> x_rounds = rounds_with_peer({held, backwards, other}, "Y");
  ASSERT_EQ(x_rounds.size(), 2u);
  SyncRound y_held = held;  // Y initiated: t1, t4 on Y's clock, t2, t3 on X's
  y_held.peer = "X";
  PairRounds p = pair_rounds(x_rounds, {y_held}, 7, 30);
  EXPECT_EQ(p.inconsistent, 1u);
  EXPECT_EQ(p.not_kernel, 0u);
  ASSERT_EQ(p.rounds.size(), 2u);
  const PairRound& x = p.rounds[0];
  EXPECT_TRUE(x.x_initiated);
  EXPECT_EQ(x.t1, 1000 - 7);
  EXPECT_EQ(x.t2, 5000 + 30);
  EXPECT_EQ(x.t3, 5010 - 30);
  EXPECT_EQ(x.t4, 1100 + 7);
  EXPECT_EQ(x.rtt(), held.kernel_rtt() + 2 * 7 + 2 * 30);
  const PairRound& y = p.rounds[1];
  EXPECT_FALSE(y.x_initiated);
  EXPECT_EQ(y.t1, 1000 - 30);
  EXPECT_EQ(y.t2, 5000 + 7);
  EXPECT_EQ(y.t3, 5010 - 7);
  EXPECT_EQ(y.t4, 1100 + 30);
  // No error: the stamps as recorded.
  PairRounds raw = pair_rounds(x_rounds, {});
  ASSERT_EQ(raw.rounds.size(), 1u);
  EXPECT_EQ(raw.rounds[0].t2, 5000);
  EXPECT_EQ(raw.rounds[0].t3, 5010);
}

// The responder's kernel receive stamp t2 is converted with clock points taken
// once it reads the probe: a probe that waited longer than that line's own
// bracket (u2 - t2 > t3 - u2) had t2 extrapolated (0.68 us off on a loaded
// 32-node run), so its user-space read u2, later than the arrival and so still
// causal, stands in for it; a probe read promptly keeps its kernel stamp.
TEST(SyncPairs, ReceiveStampExtrapolatedPastItsBracketGivesWayToTheUserRead) {
  SyncRound prompt;
  prompt.peer = "Y", prompt.phase = "start", prompt.kernel_ok = prompt.user_ok = true;
  prompt.t1 = 1000, prompt.t2 = 5000, prompt.t3 = 9000, prompt.t4 = 12000;
  prompt.u1 = 900, prompt.u2 = 7000, prompt.u3 = 8000, prompt.u4 = 12100;  // waited 2000, bracket 2000
  SyncRound late = prompt;
  late.t2 = 4000, late.u2 = 7000;  // waited 3000 before a bracket of 2000
  PairRounds p = pair_rounds({prompt, late}, {});
  ASSERT_EQ(p.rounds.size(), 2u);
  EXPECT_EQ(p.receive_extrapolated, 1u);
  EXPECT_EQ(p.rounds[0].t2, 5000);
  EXPECT_EQ(p.rounds[1].t2, 7000);
  EXPECT_EQ(p.rounds[1].t3, 9000);
  // Initiated by Y: the responder is X, and its receive stamp is the one judged.
  SyncRound y_late = late;
  y_late.peer = "X";
  PairRounds q = pair_rounds({}, {y_late}, 0, 0);
  ASSERT_EQ(q.rounds.size(), 1u);
  EXPECT_FALSE(q.rounds[0].x_initiated);
  EXPECT_EQ(q.rounds[0].t2, 7000);
  EXPECT_EQ(q.receive_extrapolated, 1u);
}

TEST(ClockRelation, ComposeIntersectAndJsonRoundTrip) {
  HullFit f1 = fit_hulls({{0, 99}, {1000, 1099}}, {{0, 101}, {1000, 1101}});  // y = x + 100 +- 1
  HullFit f2 = fit_hulls({{0, -52}, {2000, 1948}}, {{0, -48}, {2000, 1952}});  // z = y - 50 +- 2
  ASSERT_EQ(f1.status, HullStatus::Feasible);
  ASSERT_EQ(f2.status, HullStatus::Feasible);
  RelationPtr a = std::make_shared<PiecewiseRelation>(std::vector<PiecewiseRelation::Piece>{{0, f1.lines}});
  RelationPtr b = std::make_shared<PiecewiseRelation>(std::vector<PiecewiseRelation::Piece>{{0, f2.lines}});
  ComposedRelation ab(a, b);
  Bound r = ab.at(500);
  EXPECT_EQ(r.est, 550);
  EXPECT_LE(r.lo, 547);
  EXPECT_GE(r.hi, 553);
  RelationPtr back = relation_from_json(ab.to_json());
  for (int64_t x : {0, 500, 1000, 5000}) {
    EXPECT_EQ(back->at(x).lo, ab.at(x).lo);
    EXPECT_EQ(back->at(x).hi, ab.at(x).hi);
  }
  IntersectRelation both(a, relation_from_json(a->to_json()));
  EXPECT_EQ(both.at(500).width(), a->at(500).width());
  Bound disjoint_a{0, 1, 2}, disjoint_b{5, 6, 7};
  EXPECT_THROW(intersect(disjoint_a, disjoint_b, "t"), std::runtime_error);
}

// Lines near y = x + 8.1e9 at TSC magnitudes, slopes within +-200 ppm, offsets
// within +-spread ticks at x = 1e15: over a 1.5e11-tick span many of them cross.
LineSet random_set(std::mt19937_64& rng, int n, int64_t spread) {
  LineSet s;
  std::uniform_int_distribution<int64_t> off(-spread, spread), ppm(-200000, 200000);  // ppm in 1e-3 units
  const int64_t x1 = 1000000000000000, dx = 150000000000;
  for (int i = 0; i < n; ++i) {
    int64_t y1 = x1 + 8100000000 + off(rng);
    s.lines.push_back({{x1, y1}, {x1 + dx, y1 + dx + dx / 1000000000 * ppm(rng)}});
  }
  s.find_extremes();
  return s;
}

// The cursor's per-range proofs give exactly Relation::at (throwing where it
// throws) for a single set and an intersection of two, at instants stepping
// through every range of the span and clustered around the lines' crossings,
// and at() itself is the brute-force exact envelope of floor/ceil.
TEST(RelationCursor, EqualsAtEverywhereIncludingCrossings) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 6; ++round) {
    auto piece = [](LineSet s) {
      return std::make_shared<PiecewiseRelation>(std::vector<PiecewiseRelation::Piece>{{0, std::move(s)}});
    };
    LineSet sa = random_set(rng, 3 + round, 400000), sb = random_set(rng, 2 + round * 2, 300000);
    auto a = piece(sa), b = piece(sb);
    IntersectRelation both(a, b);
    for (const Relation* rel : std::initializer_list<const Relation*>{a.get(), b.get(), &both}) {
      RelationCursor cur(*rel);
      std::vector<int64_t> xs;
      for (int64_t x = 999990000000000; x < 1000160000000000; x += 7777777) xs.push_back(x);
      std::uniform_int_distribution<int64_t> near(-40000000, 40000000);
      for (const LineSet* s : {&sa, &sb})  // around each crossing of two lines of a set
        for (size_t i = 0; i < s->lines.size(); ++i)
          for (size_t j = i + 1; j < s->lines.size(); ++j) {
            double di = s->slope[i] - s->slope[j];
            if (di == 0) continue;
            double cx = double(s->x0) + (s->icpt[j] - s->icpt[i]) / di;
            if (cx < 9.9999e14 || cx > 1.0002e15) continue;
            for (int k = 0; k < 200; ++k) xs.push_back(int64_t(cx) + near(rng));
          }
      size_t thrown = 0;
      for (int64_t x : xs) {
        Bound want{};
        bool threw = false;
        try {
          want = rel->at(x);
        } catch (const std::runtime_error&) {
          threw = true;
        }
        if (threw) {
          EXPECT_THROW(cur.at(x), std::runtime_error) << "x=" << x;
          ++thrown;
          continue;
        }
        Bound got = cur.at(x);
        ASSERT_EQ(got.lo, want.lo) << "x=" << x;
        ASSERT_EQ(got.est, want.est) << "x=" << x;
        ASSERT_EQ(got.hi, want.hi) << "x=" << x;
      }
      EXPECT_LT(thrown, xs.size());
      EXPECT_GT(cur.proven_ranges(), 0u);
      if (rel != &both) {
        EXPECT_LT(cur.proven_ranges(), cur.loaded_ranges());  // some range held a crossing
        const LineSet& s = rel == a.get() ? sa : sb;
        for (int64_t x : xs) {
          int64_t lo = INT64_MAX, hi = INT64_MIN;
          for (const Line& l : s.lines) lo = std::min(lo, l.floor_at(x)), hi = std::max(hi, l.ceil_at(x));
          ASSERT_EQ(rel->at(x).lo, lo);
          ASSERT_EQ(rel->at(x).hi, hi);
        }
      }
    }
  }
}

// Encodes `ev` into one frame, which must decode to the same events.
EncodedFrame round_trip(const std::vector<TranslatedEvent>& ev) {
  EncodedFrame f;
  encode_translated(ev.data(), ev.size(), 1, f);
  std::vector<TranslatedEvent> back;
  decode_translated(f.hdr, f.payload.data(), f.payload.size(), back);
  EXPECT_EQ(back, ev);
  return f;
}

TEST(TranslatedFrame, RoundTripAndCorruption) {
  std::mt19937_64 rng(3);
  std::vector<TranslatedEvent> ev;
  for (int k = 0; k < 5000; ++k) {
    TranslatedEvent e;
    e.local_ts = 1'000'000'000'000'000 + uint64_t(k) * 1000 + rng() % 100;
    e.ref_ts = int64_t(e.local_ts) - 7'000'000'000 + int64_t(rng() % 10);
    e.ref_lo = e.ref_ts - int64_t(rng() % 200000);
    e.ref_hi = e.ref_ts + int64_t(rng() % 200000);
    e.channel = k % 3 ? 0x1234567890abcdefull : 42;
    e.tuple = rng();
    e.pid = 7, e.tid = uint32_t(8 + k % 2), e.cpu = uint16_t(k % 4), e.node = uint16_t(k % 3), e.kind = 1;
    e.cpu_stamped = k % 5 != 0;
    ev.push_back(e);
  }
  EncodedFrame f = round_trip(ev);
  std::vector<TranslatedEvent> back;
  FrameHeader h = f.hdr;
  h.count += 1;
  EXPECT_THROW(decode_translated(h, f.payload.data(), f.payload.size(), back), std::runtime_error);
  TranslatedEvent bad = ev[0];
  bad.ref_lo = bad.ref_ts + 1;
  EXPECT_THROW(encode_translated(&bad, 1, 1, f), std::invalid_argument);
}

// The translated frame's codec on its own: values of every varint length (1 to
// 10 bytes: deltas that wrap, ids from the whole 64-bit range) come back
// exactly; a payload cut anywhere, or left with a byte too many, is an error
// that names the frame type, never a misread.
TEST(TranslatedFrame, EveryVarintLengthRoundTripsAndEveryCutIsAnError) {
  std::vector<TranslatedEvent> in;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 300; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    TranslatedEvent e;
    const unsigned bits = unsigned(i % 64) + 1;  // deltas of every width
    const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    e.local_ts = (x & mask) >> 1;
    e.ref_ts = int64_t(e.local_ts) - int64_t((x >> 7) & mask >> 2);
    e.ref_lo = e.ref_ts - int64_t(x % 1000), e.ref_hi = e.ref_ts + int64_t((x >> 3) % 70000);
    e.channel = x % 5 * 0x1000000000ull, e.tuple = x & mask;
    e.pid = uint32_t(x >> 32), e.tid = uint32_t(x), e.cpu = uint16_t(x % 300), e.node = uint16_t(x % 40);
    e.kind = uint8_t(x % 3), e.cpu_stamped = x & 1;
    in.push_back(e);
  }
  EncodedFrame f = round_trip(in);
  std::vector<TranslatedEvent> out;

  std::vector<uint8_t> raw(f.hdr.raw_len + 1);
  ASSERT_EQ(ZSTD_decompress(raw.data(), f.hdr.raw_len, f.payload.data(), f.payload.size()), f.hdr.raw_len);
  FrameHeader h = f.hdr;
  h.flags &= uint16_t(~kFrameZstd);
  decode_translated(h, raw.data(), h.raw_len, out);
  ASSERT_EQ(out, in) << "the same frame uncompressed";
  for (size_t cut = 0; cut <= raw.size(); ++cut) {
    if (cut == h.raw_len) continue;
    try {
      decode_translated(h, raw.data(), cut, out);
      ADD_FAILURE() << "a payload of " << cut << " of " << h.raw_len << " bytes decoded";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("translated frame: ", 0), 0u) << e.what();
    }
  }
}

// A frame written before kFrameCpuStamped: its cpu column is read whole and
// no stamp counts as read on a known CPU (the same bytes, without the flag).
TEST(TranslatedFrame, FrameWithoutStampCpusNamesNone) {
  TranslatedEvent e;
  e.local_ts = 100, e.ref_ts = e.ref_lo = e.ref_hi = 100, e.channel = 1, e.cpu = 3, e.kind = 1;
  EncodedFrame f;
  encode_translated(&e, 1, 1, f);
  FrameHeader old = f.hdr;
  old.flags &= uint16_t(~kFrameCpuStamped);
  std::vector<TranslatedEvent> back;
  decode_translated(old, f.payload.data(), f.payload.size(), back);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].cpu, 6) << "3 << 1, read as a version-1 cpu";
  EXPECT_FALSE(back[0].cpu_stamped);
}

// Same-node durations: two stamps of one CPU's TSC carry no skew term; of two
// CPUs, each stamp its own CPU's error (none on the reference CPU); of a CPU
// not known, the node's largest error.
TEST(DurationBounds, StampsOfOneCpuCarryNoSkew) {
  DurationBounds db;
  db.names = {"ref", "b"};
  db.to_ref = {std::make_shared<IdentityRelation>(), std::make_shared<IdentityRelation>()};
  StampErrors errs;
  errs.add(0, true, 0);  // the reference CPU
  errs.add(100, true, 1);
  errs.add(300, true, 2);
  errs.add(300, false, 0);  // a stamp of no known CPU
  db.errs = {errs, errs};
  db.ref = 0;
  const char* scenario = "";
  for (uint16_t node : {0, 1}) {
    JoinStamp a{1000, 1000, 900, 1100, node, 1, true}, b{5000, 5000, 4700, 5300, node, 1, true};
    Bound one = db.duration(a, b, scenario);
    EXPECT_EQ(one.lo, 4000) << scenario;
    EXPECT_EQ(one.hi, 4000) << scenario;
    b.cpu = 2;  // another CPU: both CPUs' errors, 100 + 300
    Bound two = db.duration(a, b, scenario);
    EXPECT_EQ(two.lo, 3600) << scenario;
    EXPECT_EQ(two.hi, 4400) << scenario;
    b.cpu = 1, b.cpu_stamped = false;  // a CPU not known (the probe site's stamp): the largest
    Bound unknown = db.duration(a, b, scenario);
    EXPECT_EQ(unknown.lo, 3600) << scenario;
    EXPECT_EQ(unknown.hi, 4400) << scenario;
  }
  // On a non-reference node, one stamp on the reference CPU: the other's error alone.
  JoinStamp a{1000, 0, 0, 0, 1, 0, true}, b{5000, 0, 0, 0, 1, 1, true};
  Bound d = db.duration(a, b, scenario);
  EXPECT_EQ(d.lo, 3900);
  EXPECT_EQ(d.hi, 4100);
  // A CPU no stamp was seen on: the largest error.
  b.cpu = 7;
  d = db.duration(a, b, scenario);
  EXPECT_EQ(d.lo, 3700);
  EXPECT_EQ(d.hi, 4300);
}

// What translate writes of a node's stamp errors and latency reads back; a
// malformed entry counts with the largest error, and no CPU above it.
TEST(StampErrors, PerCpuRoundTripsAndMalformedFallsBack) {
  StampErrors e;
  e.add(0, true, 0);
  e.add(250, true, 1);
  e.add(90, true, 1);
  e.add(600, false, 5);
  nlohmann::json j = e.per_cpu_json(1000);
  EXPECT_EQ(j.dump(), R"({"0":0,"1":250})");
  StampErrors back = StampErrors::from_json(e.any(), j);
  EXPECT_EQ(back.of(true, 0), 0u);
  EXPECT_EQ(back.of(true, 1), 250u);
  EXPECT_EQ(back.of(true, 2), 600u);
  EXPECT_EQ(back.of(false, 0), 600u);
  StampErrors bad = StampErrors::from_json(600, nlohmann::json::parse(R"({"x":0,"1":-4,"2":9000,"3a":0})"));
  EXPECT_EQ(bad.of(true, 1), 600u);
  EXPECT_EQ(bad.of(true, 2), 600u) << "never more than the largest";
  EXPECT_EQ(bad.of(true, 3), 600u);
  EXPECT_EQ(bad.any(), 600u);
}

// Frames with one channel or many, met in any order and again, decode to
// their events (a channel's index is its rank of first use in the frame).
TEST(TranslatedFrame, ManyChannelsRoundTrip) {
  std::mt19937_64 rng(5);
  for (size_t channels : {1, 15, 16, 17, 18, 40, 300}) {
    std::vector<TranslatedEvent> ev;
    for (int k = 0; k < 3000; ++k) {
      TranslatedEvent e;
      e.local_ts = 5'000'000 + uint64_t(k) * 100;
      e.ref_ts = int64_t(e.local_ts) + 3;
      e.ref_lo = e.ref_ts - 10, e.ref_hi = e.ref_ts + 10;
      e.channel = 0x9e3779b97f4a7c15ull * (1 + rng() % channels);
      e.tuple = uint64_t(k), e.pid = 1, e.tid = 2, e.cpu = 0, e.node = 0, e.kind = 1;
      ev.push_back(e);
    }
    SCOPED_TRACE(std::to_string(channels) + " channels");
    round_trip(ev);
  }
}

}  // namespace
}  // namespace cptrace
