// The rate-bounded relation (translate/drift_bound.h) on clocks that change rate
// mid-run: every bound contains the truth, with dense traffic the width stays near
// the local one-way delays, with rounds at start and stop only it grows with the
// distance to them; it survives the meta.json round trip; and a relation with a
// new round answers as the older one below same_below().
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "translate/drift_bound.h"
#include "translate/hull_sync.h"

namespace cptrace {
namespace {

constexpr double kHz = 2.5e9;  // both nodes' nominal frequency where the clocks tick alike

// y = f(x): from-clock x to to-clock y, rate 1 + 50 ppm, then 1 - 30 ppm after x = 150e9.
long double truth(long double x) {
  const long double c = 150e9L, y0 = 4e12L;
  return x <= c ? y0 + x * (1 + 50e-6L) : y0 + c * (1 + 50e-6L) + (x - c) * (1 - 30e-6L);
}

// Messages both ways every `period` ticks over [1e9, 300e9], delays 100k-400k ticks.
Constraints traffic(long double period, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Constraints c;
  for (long double x = 1e9L; x < 300e9L; x += period) {
    int64_t d1 = 100000 + int64_t(rng() % 300000), d2 = 100000 + int64_t(rng() % 300000);
    c.above.push_back({int64_t(x), int64_t(std::ceil(truth(x) + d1))});  // sent at x, received later
    c.below.push_back({int64_t(x) + 7, int64_t(std::floor(truth(x + 7) - d2))});  // sent earlier, received at x
  }
  return c;
}

// Rounds: 50 at the start and 50 at the stop.
Constraints rounds() {
  Constraints c;
  for (long double base : {1e9L, 299e9L})
    for (int k = 0; k < 50; ++k) {
      long double x = base + k * 1e6L;
      c.above.push_back({int64_t(x), int64_t(std::ceil(truth(x) + 120000))});
      c.below.push_back({int64_t(x + 500000), int64_t(std::floor(truth(x + 500000) - 120000))});
    }
  return c;
}

void expect_contains(const Relation& r, const char* what, int64_t& max_width, int64_t& mid_width) {
  max_width = 0;
  for (long double x = 0; x <= 310e9L; x += 0.37e9L) {
    Bound b = r.at(int64_t(x));
    ASSERT_TRUE(b.contains(truth(x))) << what << " x " << (double)x << " [" << b.lo << ", " << b.hi << "] truth "
                                      << (double)truth(x);
    max_width = std::max(max_width, b.width());
  }
  mid_width = r.at(int64_t(150e9L)).width();
}

TEST(DriftBound, RateChangeContainedForRoundsTrafficAndBoth) {
  Constraints t = traffic(1e6L, 5), rd = rounds();
  Constraints both = t;
  both.above.insert(both.above.end(), rd.above.begin(), rd.above.end());
  both.below.insert(both.below.end(), rd.below.begin(), rd.below.end());
  int64_t wmax[3], wmid[3];
  const char* names[] = {"rounds", "traffic", "both"};
  const Constraints* cs[] = {&rd, &t, &both};
  for (int i = 0; i < 3; ++i) {
    DriftBoundRelation r(*cs[i], 500000, kHz, kHz);  // 500 ppm
    ASSERT_TRUE(r.bounded());
    expect_contains(r, names[i], wmax[i], wmid[i]);
    printf("  [%s] %zu constraint points kept (4 families) of %zu, width mid-run %lld ticks, max %lld\n", names[i],
           r.kept(), cs[i]->size(), (long long)wmid[i], (long long)wmax[i]);
  }
  // With traffic the width between the rounds stays near the delays (< 1 ms of
  // ticks), rounds alone widen by 2 rho per tick away from them.
  EXPECT_LT(wmid[1], 2000000);
  EXPECT_LT(wmid[2], 2000000);
  EXPECT_GT(wmid[0], 100 * wmid[1]);
  // A single line cannot hold: the hull of the same traffic crosses.
  EXPECT_FALSE(hull_sync(t).linear);
}

TEST(DriftBound, JsonRoundTripAndScale) {
  DriftBoundRelation r(traffic(50e6L, 9), 200000, kHz, kHz);
  RelationPtr back = relation_from_json(r.to_json());
  for (int64_t x : {int64_t(0), int64_t(77e9), int64_t(200e9), int64_t(400e9)}) {
    EXPECT_EQ(back->at(x).lo, r.at(x).lo);
    EXPECT_EQ(back->at(x).hi, r.at(x).hi);
  }
  Bound d = r.scale({1000000000, 1000000000, 1000000000}, 0);
  EXPECT_EQ(d.lo, 999800000);
  EXPECT_EQ(d.hi, 1000200000);
  Constraints one_way;
  one_way.above.push_back({1, 2});
  EXPECT_FALSE(DriftBoundRelation(one_way, 1000, kHz, kHz).bounded());
  EXPECT_THROW(DriftBoundRelation(one_way, 0, kHz, kHz), std::invalid_argument);
  EXPECT_THROW(DriftBoundRelation(one_way, 1000, 0, kHz), std::invalid_argument);
  EXPECT_THROW(DriftBoundRelation(one_way, 1000, kHz, NAN), std::invalid_argument);
}

// same_below: a relation with one more round after every other answers exactly
// as the older one at every instant below the returned one, at the kept points
// and between them; that instant is an earlier round, usually near the end but
// not always the previous one (so the live view computes it, never assumes it).
TEST(DriftBound, NewRoundChangesNothingBelowSameBelow) {
  std::mt19937_64 rng(5);
  const int64_t rho = 200000;  // 200 ppm: the truth's rates are within it
  size_t before_previous = 0, trials = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Constraints c;
    int rounds = 3 + int(rng() % 20);
    long double x = 1e9L;
    for (int k = 0; k <= rounds; ++k, x += 1e9L + (long double)(rng() % 2000000000)) {
      // A round at x: sent at x, answered, back after delays of 50k-2M ticks (sometimes far apart).
      int64_t d1 = 50000 + int64_t(rng() % (k % 3 ? 300000 : 2000000)), d2 = 50000 + int64_t(rng() % 300000);
      c.above.push_back({int64_t(x), int64_t(std::ceil(truth(x) + d1))});
      c.below.push_back({int64_t(x) + 2 * d1, int64_t(std::floor(truth(x + 2 * d1) - d2))});
    }
    Constraints older = c;
    older.above.pop_back(), older.below.pop_back();  // the last round not read yet
    DriftBoundRelation now(c, rho, kHz, kHz), before(older, rho, kHz, kHz);
    const int64_t below = now.same_below(before);
    const int64_t prev = older.above.back().x;
    trials++;
    ASSERT_LE(below, c.above.back().x) << "the new round changes the bound at its own instant";
    std::vector<int64_t> probes;
    for (const Pt& p : older.above) probes.insert(probes.end(), {p.x - 1, p.x, p.x + 1});
    for (const Pt& p : older.below) probes.insert(probes.end(), {p.x - 1, p.x, p.x + 1});
    for (int k = 0; k < 300; ++k) probes.push_back(int64_t(rng() % uint64_t(x)));
    probes.push_back(below - 1);
    bool changed_before_previous = false;
    for (int64_t y : probes) {
      if (y < prev && y >= below) {
        Bound a = now.at(y), b = before.at(y);
        changed_before_previous = changed_before_previous || a.lo != b.lo || a.hi != b.hi;
      }
      if (y >= below) continue;
      Bound a = now.at(y), b = before.at(y);
      ASSERT_EQ(a.lo, b.lo) << "trial " << trial << " at " << y << " (same below " << below << ")";
      ASSERT_EQ(a.hi, b.hi) << "trial " << trial << " at " << y;
      ASSERT_EQ(a.est, b.est) << "trial " << trial << " at " << y;
    }
    before_previous += changed_before_previous;
  }
  // The math: a new round can move bounds before the previous round (its
  // constraint, extrapolated back at the extreme rate, beats a loose earlier one).
  EXPECT_GT(before_previous, 0u) << "a new round never moved a bound before the previous round";
  printf("  [drift] a new round moved bounds before the previous round in %zu of %zu trials\n", before_previous,
         trials);
  DriftBoundRelation same(rounds(), rho, kHz, kHz);
  EXPECT_EQ(same.same_below(DriftBoundRelation(rounds(), rho, kHz, kHz)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(same.same_below(DriftBoundRelation(rounds(), rho + 1, kHz, kHz)), std::numeric_limits<int64_t>::min());
  // The same rho around another nominal ratio is another rate interval.
  EXPECT_EQ(same.same_below(DriftBoundRelation(rounds(), rho, kHz, kHz * 1.001)), std::numeric_limits<int64_t>::min());
}

// Two nodes whose TSCs tick at different nominal frequencies, 2.1 and 2.8 ticks per
// ns (k = 4/3), each off its nominal by a skew, the to-node changing rate mid-run:
// its rate against the from-clock is k (1 - 100 ppm), then k (1 + 40 ppm).
struct TwoFreq {
  const long double f_from = 2.1L, f_to = 2.8L, o_from = 3e9L, o_to = 7e12L, change = 60e9L;  // change: t in ns
  long double t_of(long double x) const { return (x - o_from) / (f_from * (1 + 40e-6L)); }
  long double truth(long double x) const {
    long double t = t_of(x);
    return o_to + f_to * ((1 - 60e-6L) * t + 140e-6L * std::max(0.0L, t - change));
  }
  // Rounds at the start and stop, traffic both ways in between every `period` ticks.
  Constraints constraints(long double period, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    Constraints c;
    auto both = [&](long double x, int64_t d1, int64_t d2) {
      c.above.push_back({int64_t(x), int64_t(std::ceil(truth(x) + d1))});
      c.below.push_back({int64_t(x) + 7, int64_t(std::floor(truth(x + 7) - d2))});
    };
    for (long double base : {4e9L, 299e9L})
      for (int k = 0; k < 30; ++k) both(base + k * 1e6L, 160000, 160000);
    for (long double x = 5e9L; period > 0 && x < 299e9L; x += period)
      both(x, 100000 + int64_t(rng() % 300000), 100000 + int64_t(rng() % 300000));
    return c;
  }
};

TEST(DriftBound, NodesAtDifferentNominalFrequencies) {
  const TwoFreq w;
  const int64_t rho = 200000;  // 200 ppm around k: the truth's rates are within it
  for (long double period : {0.0L, 2e9L}) {
    DriftBoundRelation r(w.constraints(period, 3), rho, 2.1e9, 2.8e9);
    ASSERT_TRUE(r.bounded());
    EXPECT_EQ(r.rates().lo, 1333066666);  // 4/3 (1 - 200 ppm) * 1e9, rounded down
    EXPECT_EQ(r.rates().hi, 1333600000);  // 4/3 (1 + 200 ppm) * 1e9, exact
    // A duration on the from-clock, scaled: contains the true to-clock duration.
    for (long double x1 : {5e9L, 100e9L, 250e9L})
      for (long double len : {1e6L, 3e9L, 40e9L}) {
        const int64_t d = int64_t(len);
        Bound s = r.scale({d, d, d}, int64_t(x1));
        long double truth = w.truth(x1 + d) - w.truth(x1);
        ASSERT_TRUE(s.contains(truth)) << "scale " << d << " at " << (double)x1 << " [" << s.lo << ", " << s.hi
                                       << "] truth " << (double)truth;
        EXPECT_NEAR(double(s.est), double(truth), double(len) * 2e-4);
      }
    int64_t widest = 0;
    for (long double x = 0; x <= 320e9L; x += 0.37e9L) {
      Bound b = r.at(int64_t(x));
      ASSERT_TRUE(b.contains(w.truth(x))) << "period " << (double)period << " x " << (double)x << " [" << b.lo << ", "
                                          << b.hi << "] truth " << (double)w.truth(x);
      widest = std::max(widest, b.width());
    }
    printf("  [two frequencies, traffic every %.0f ticks] widest bound %lld ticks\n", (double)period,
           (long long)widest);
  }
  // The meta.json form keeps the rate interval; an old file (max_drift_ppb only) means k = 1.
  DriftBoundRelation r(w.constraints(2e9L, 3), rho, 2.1e9, 2.8e9);
  nlohmann::json j = r.to_json();
  RelationPtr back = relation_from_json(j);
  EXPECT_EQ(back->at(int64_t(150e9)).lo, r.at(int64_t(150e9)).lo);
  EXPECT_EQ(back->scale({1000000, 1000000, 1000000}, 0).hi, r.scale({1000000, 1000000, 1000000}, 0).hi);
  j.erase("rate_lo"), j.erase("rate_hi"), j.erase("nominal_hz");
  EXPECT_EQ(relation_from_json(j)->scale({1000000000, 1000000000, 1000000000}, 0).hi, 1000200000);
  // The same rho around ratio 1 is no bound here: the rounds contradict it.
  EXPECT_THROW(DriftBoundRelation(w.constraints(0, 3), rho, 2.8e9, 2.8e9).at(int64_t(150e9)), std::runtime_error);
}

// Where k comes from: meta.json's tsc_hz, else the clock stream's slope to the
// kHz; unknown (0) without either, and the error then names the node.
TEST(DriftBound, NominalFrequencyFromMetaElseStreamElseUnknown) {
  ClockMap stream({{1000, 0, 20, 0}, {1000 + 2100123456, 1000000000, 20, 0}});
  EXPECT_EQ(nominal_tsc_hz({{"tsc_hz", 2.8e9}}, stream), 2.8e9);
  EXPECT_EQ(nominal_tsc_hz({{"node", "B"}}, stream), 2100123000.0);
  EXPECT_EQ(nominal_tsc_hz({{"node", "B"}}, ClockMap({{1000, 0, 20, 0}})), 0.0);
  EXPECT_NE(unknown_tsc_hz_error("B (run/B)").find("B (run/B): TSC frequency unknown"), std::string::npos);
}

}  // namespace
}  // namespace cptrace
