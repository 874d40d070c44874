// ClockBounds against a simulated timekeeper whose CLOCK_MONOTONIC is an exact
// piecewise-linear function of the TSC, slewed the ways NTP clients slew it:
// every stamp's true TSC instant must be inside its bound, whatever the slew,
// and a run that breaks the model's assumption is counted, never silently wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "clock/clock_change_candidates.h"
#include "clock/clock_map.h"
#include "clock/clock_quantum.h"
#include "clock/ntp_state.h"

namespace cptrace {
namespace {

using ld = long double;
constexpr ld kHz = 2.1;  // ticks per ns (nominal)
constexpr uint64_t kTsc0 = 1'000'000'000'000'000ull, kMono0 = 7'000'000'000'000ull;

// MONO(tsc) with the rate changing at given TSC instants (ns per tick there).
struct Timekeeper {
  std::vector<std::pair<ld, ld>> changes;  // (tsc, ns per tick from there on), sorted
  ld mono(ld tsc) const {
    ld m = kMono0, t = kTsc0, r = 1 / kHz;
    for (auto& [ct, cr] : changes) {
      if (ct >= tsc) break;
      m += (ct - t) * r, t = ct, r = cr;
    }
    return m + (tsc - t) * r;
  }
  void change_at_ns(ld mono_ns_from_start, ld ppm) {  // approx. instant is fine
    changes.push_back({kTsc0 + mono_ns_from_start * kHz, 1 / kHz * (1 + ppm * 1e-6L)});
  }
};

struct SlewRun {
  std::vector<ClockPoint> pts;
  std::vector<uint64_t> marks;  // witnessed calls: a change within one tick of each
  std::mt19937_64 rng{42};
  // A point as sample_clock_point takes it: the mono reading happens at some
  // instant inside [t1, t1 + w].
  void point_at(const Timekeeper& k, ld ns) {
    uint32_t w = 40 + rng() % 200;
    uint64_t t1 = kTsc0 + uint64_t(ns * kHz);
    ld read_at = ld(t1) + ld(rng() % (w + 1));
    pts.push_back({t1 + w / 2, uint64_t(std::floor(k.mono(read_at))), w, 0});
  }
  void every(const Timekeeper& k, ld from_ns, ld to_ns, ld step_ns) {
    for (ld t = from_ns; t <= to_ns; t += step_ns) point_at(k, t);
  }
  // What the recorder does after it sees an adjustment at `ns`.
  void dense_after(const Timekeeper& k, ld ns) {
    marks.push_back(uint64_t(k.mono(kTsc0 + ns * kHz)));
    for (ld d : {0.3e6L, 2e6L, 5e6L, 10e6L, 20e6L, 50e6L}) point_at(k, ns + d);
  }
};

struct Result {
  uint64_t checked = 0, contained = 0;
  ld widest_ticks = 0, sum_width = 0;
};

// Stamps at random true instants over the run: floor(MONO) as the kernel gives it.
Result check(const Timekeeper& k, const ClockMap& map, ld span_ns, int n = 200000) {
  std::mt19937_64 rng(7);
  Result r;
  ld first = map.points().front().tsc, last = map.points().back().tsc;
  for (int i = 0; i < n; ++i) {
    ld tau = first + (last - first) * ld(rng() % 1000000) / 1e6L;
    uint64_t m = uint64_t(std::floor(k.mono(tau)));
    TscBounds b = map.mono_to_tsc_bounds(m);
    bool ok = ld(b.lo) <= tau && tau <= ld(b.hi);
    r.checked++, r.contained += ok;
    if (!ok && r.checked - r.contained < 5)
      ADD_FAILURE() << "tau " << double(tau - kTsc0) << " bound [" << double(ld(b.lo) - kTsc0) << ", "
                    << double(ld(b.hi) - kTsc0) << "]";
    r.widest_ticks = std::max(r.widest_ticks, ld(b.hi - b.lo));
    r.sum_width += ld(b.hi - b.lo);
  }
  (void)span_ns;
  printf("  [clock bounds] %llu / %llu contained; width mean %.0f ns, max %.0f ns\n", (unsigned long long)r.contained,
         (unsigned long long)r.checked, double(r.sum_width / r.checked / kHz), double(r.widest_ticks / kHz));
  return r;
}

ClockMap build(SlewRun& run) {
  std::vector<ClockChange> changes;
  for (uint64_t at : run.marks) changes.push_back({at, at + kChangeEffectNs});
  ClockMap m(run.pts, changes);
  const ClockModelStats& s = m.model_stats();
  printf("  [clock bounds] segments %llu: one rate %llu, change %llu, either %llu, violated %llu, crowded %llu\n",
         (unsigned long long)s.segments, (unsigned long long)s.one_rate, (unsigned long long)s.rate_change,
         (unsigned long long)s.either, (unsigned long long)s.violated, (unsigned long long)s.crowded);
  return m;
}

TEST(ClockBounds, UnslewedClockIsTightAndContained) {
  Timekeeper k;
  SlewRun run;
  run.every(k, 0, 10e9, 100e6);
  ClockMap m = build(run);
  Result r = check(k, m, 10e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_EQ(m.model_stats().violated, 0u);
  EXPECT_LT(r.widest_ticks, 2000);  // < 1 us: brackets (<= 240 ticks) plus the dither slack
}

// +-500 ppm toggled every 150 ms, each change applied up to 4 ms after the
// witnessed call (the next tick), dense points after each call.
TEST(ClockBounds, FrequencyTogglesAreContained) {
  Timekeeper k;
  SlewRun run;
  std::mt19937_64 rng(3);
  std::vector<ld> calls;
  for (ld t = 175e6; t < 5.8e9; t += 150e6) {  // none in an end segment (those fall back)
    calls.push_back(t);
    k.change_at_ns(t + ld(rng() % 4000000), calls.size() % 2 ? 500 : -500);
  }
  run.every(k, 0, 6e9, 100e6);
  for (ld t : calls) run.dense_after(k, t);
  std::sort(run.pts.begin(), run.pts.end(), [](auto& a, auto& b) { return a.tsc < b.tsc; });
  ClockMap m = build(run);
  Result r = check(k, m, 6e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_EQ(m.model_stats().violated + m.model_stats().crowded, 0u);
  EXPECT_LT(r.widest_ticks, 4000);  // the change is reconstructed: ~1 us, not 1000 ppm x 25 ms
}

// The recorder's stop sequence takes a point every 50 ms and none after a
// call, so a toggle every 150 ms leaves a change in every third segment. One
// just after a point (or just before one) barely moves its segment's average
// rate: both hypotheses fit, and H1's neighbour rates must not reach across the
// next change (a two-segment baseline that does is no baseline).
TEST(ClockBounds, TogglesEveryThirdSparseSegmentAreContained) {
  for (ld delta : {0.05e6L, 0.15e6L, 1e6L, 25e6L, 49e6L, 49.9e6L}) {
    for (ld tick : {500.0L, 20000.0L}) {
      Timekeeper k;
      SlewRun run;
      int n = 0;
      for (ld t = 100e6L + delta; t < 3e9; t += 150e6L) {
        k.change_at_ns(t, ++n % 2 ? tick : -tick);
        run.marks.push_back(uint64_t(k.mono(kTsc0 + (t - 20e3L) * kHz)));  // the call's entry, 20 us before
      }
      run.every(k, 0, 3e9, 50e6);
      ClockMap m = build(run);
      Result r = check(k, m, 3e9, 50000);
      EXPECT_EQ(r.contained, r.checked) << "change " << double(delta / 1e6L) << " ms after a point, " << double(tick)
                                        << " ppm";
    }
  }
}

// chrony's tick slews: +-10 % rate changes, witnessed, and the same with
// 100 ms points only (no dense points: the reconstruction alone).
TEST(ClockBounds, TickChangesOfTenPercentAreContained) {
  for (bool dense : {true, false}) {
    Timekeeper k;
    SlewRun run;
    std::vector<ld> calls;
    for (ld t = 333e6; t < 8e9; t += 700e6) {
      calls.push_back(t);
      k.change_at_ns(t + 1.7e6L, calls.size() % 2 ? 100000 : -100000);
    }
    run.every(k, 0, 8e9, 100e6);
    if (dense)
      for (ld t : calls) run.dense_after(k, t);
    else
      for (ld t : calls) run.marks.push_back(uint64_t(k.mono(kTsc0 + t * kHz)));
    std::sort(run.pts.begin(), run.pts.end(), [](auto& a, auto& b) { return a.tsc < b.tsc; });
    ClockMap m = build(run);
    Result r = check(k, m, 8e9);
    EXPECT_EQ(r.contained, r.checked) << "dense " << dense;
    EXPECT_EQ(m.model_stats().violated, 0u) << "dense " << dense;
  }
}

// A kernel PLL offset slew: the rate steps down at every second boundary, no
// call to witness it (the recorder marks the boundaries while a slew runs).
TEST(ClockBounds, PllSlewAtSecondBoundariesIsContained) {
  Timekeeper k;
  SlewRun run;
  ld ppm = 1250;
  for (int s = 1; s < 10; ++s) {
    k.change_at_ns(s * 1e9L + 2e6L, ppm);
    ppm *= 0.75L;
  }
  run.every(k, 0, 10e9, 100e6);
  for (int s = 1; s < 10; ++s) run.marks.push_back(uint64_t(k.mono(kTsc0 + s * 1e9L * kHz)));
  ClockMap m = build(run);
  Result r = check(k, m, 10e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_EQ(m.model_stats().violated, 0u);
}

// A change nobody witnessed (a hypervisor's clock update, a simulated clock's
// rate change): the data alone shows it and H1 reconstructs it.
TEST(ClockBounds, UnwitnessedSingleChangeIsContained) {
  Timekeeper k;
  SlewRun run;
  k.change_at_ns(4.321e9L, 300);
  run.every(k, 0, 9e9, 100e6);
  ClockMap m = build(run);
  Result r = check(k, m, 9e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_GE(m.model_stats().rate_change, 1u);
}

// Two changes inside one segment (a slew there and back within 100 ms, with
// nothing witnessed) break the assumption: the segment must be caught as
// violated and fall back to the assumption-free bound, still containing truth.
TEST(ClockBounds, TwoChangesInOneSegmentAreCaughtNotWrong) {
  Timekeeper k;
  SlewRun run;
  k.change_at_ns(3.02e9L, 100000);
  k.change_at_ns(3.06e9L, 0);
  run.every(k, 0, 6e9, 100e6);
  ClockMap m = build(run);
  Result r = check(k, m, 6e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_GE(m.model_stats().violated, 1u);
}

// Two witnessed changes within one three-segment window: not checkable, so the
// window falls back to the monotonic bound and is counted.
TEST(ClockBounds, CrowdedWitnessedChangesFallBack) {
  Timekeeper k;
  SlewRun run;
  k.change_at_ns(2.01e9L, 500);
  k.change_at_ns(2.05e9L, -500);
  run.every(k, 0, 4e9, 100e6);
  run.marks = {uint64_t(k.mono(kTsc0 + 2.0e9L * kHz)), uint64_t(k.mono(kTsc0 + 2.04e9L * kHz))};
  ClockMap m = build(run);
  Result r = check(k, m, 4e9);
  EXPECT_EQ(r.contained, r.checked);
  EXPECT_GE(m.model_stats().crowded, 1u);
}

// A recorder stopped for 3 s (SIGSTOP, an overloaded node) while the clock is
// toggled +-500 ppm every 150 ms: no point inside the gap, every call witnessed
// (the BPF watch keeps them), so the gap's one segment is crowded. Monotonicity
// alone bounds a stamp there by the whole 3 s; the rate envelope of the
// discipline the calls set (clock_rate_envelope.h) bounds it to ~1000 ppm of its
// distance from the nearer point, and still contains it. An envelope that the
// data contradicts (one claiming +-100 ppm) is refuted and not used.
TEST(ClockBounds, StalledRecorderGapIsBoundedByTheRateEnvelope) {
  Timekeeper k;
  SlewRun run;
  int n = 0;
  for (ld t = 175e6; t < 5.8e9; t += 150e6) {
    k.change_at_ns(t + 1e5L, ++n % 2 ? 500 : -500);
    run.marks.push_back(uint64_t(k.mono(kTsc0 + t * kHz)));
  }
  run.every(k, 0, 1.5e9, 100e6);
  run.every(k, 4.5e9, 6e9, 100e6);
  for (ClockPoint& p : run.pts) {  // RAW: the clocksource undisciplined, read inside the bracket
    p.flags |= kClockHasRaw;
    p.raw_tsc = p.tsc, p.raw_width_ticks = p.width_ticks;
    p.raw_ns = uint64_t(std::floor(ld(kMono0 / 2) + ld(p.tsc - kTsc0) / kHz));
  }
  std::vector<ClockChange> changes;
  for (uint64_t at : run.marks) changes.push_back({at, at + kChangeEffectNs});
  const ld d = kDitherPpm * 1e-6L;
  ClockMap plain(run.pts, changes);
  ClockMap enveloped(run.pts, changes, {}, {}, RateEnvelope{1 - 500e-6L - d, 1 + 500e-6L + d});
  ClockMap refuted(run.pts, changes, {}, {}, RateEnvelope{1 - 100e-6L - d, 1 + 100e-6L + d});
  Result rp = check(k, plain, 6e9), re = check(k, enveloped, 6e9), rr = check(k, refuted, 6e9);
  EXPECT_EQ(rp.contained, rp.checked);
  EXPECT_EQ(re.contained, re.checked);
  EXPECT_EQ(rr.contained, rr.checked);
  EXPECT_GE(enveloped.model_stats().enveloped, 1u);
  EXPECT_EQ(refuted.model_stats().enveloped, 0u);
  EXPECT_EQ(plain.model_stats().enveloped, 0u);
  EXPECT_GT(rp.widest_ticks, 2e9L * kHz);  // the gap's whole length, nearly
  EXPECT_LT(re.widest_ticks, 1002e-6L * 1.5e9L * kHz + 4000);  // the envelope at mid-gap
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {

// A clock that moves against the TSC with no syscall (issue 35, item 3): kvm-clock
// re-anchored by the host, a clocksource switch, a TSC whose rate changes. Both
// CLOCK_MONOTONIC and CLOCK_MONOTONIC_RAW come from the same clocksource read, so
// both move; RAW, never disciplined, is the witness (clock/raw_witness.h).
struct FaultyClock {
  std::vector<std::pair<ld, ld>> steps;  // (tsc, ns added to both clocks from there on)
  ld rate_change_tsc = INFINITY, rate_change_ppm = 0;  // the TSC's own rate changes
  ld rate_back_tsc = INFINITY;  // and changes back (a migration there and back)
  ld quantum = 1;  // readings truncated to this step (ns)
  ld ns_since_start(ld tsc) const {
    ld ns = (tsc - kTsc0) / kHz;
    if (tsc > rate_change_tsc) ns -= (tsc - rate_change_tsc) / kHz * rate_change_ppm * 1e-6L;
    if (tsc > rate_back_tsc) ns += (tsc - rate_back_tsc) / kHz * rate_change_ppm * 1e-6L;
    for (auto& [t, s] : steps)
      if (tsc >= t) ns += s;
    return ns;
  }
  uint64_t read(ld tsc, uint64_t base) const {
    ld v = ld(base) + ns_since_start(tsc);
    return uint64_t(std::floor(v / quantum) * quantum);
  }
  uint64_t mono(ld tsc) const { return read(tsc, kMono0); }
  uint64_t raw(ld tsc) const { return read(tsc, kMono0 / 2); }
};

// Points as sample_clock_point takes them: MONOTONIC's bracket, then RAW's.
std::vector<ClockPoint> faulty_points(const FaultyClock& c, ld span_ns, ld every_ns, bool with_raw = true) {
  std::mt19937_64 rng(11);
  std::vector<ClockPoint> pts;
  for (ld t = 0; t <= span_ns; t += every_ns) {
    uint32_t w = 40 + rng() % 120, wr = 40 + rng() % 120;
    uint64_t t1 = kTsc0 + uint64_t(t * kHz), r1 = t1 + w + 30;
    ClockPoint p{t1 + w / 2, c.mono(ld(t1) + ld(rng() % (w + 1))), w, 0};
    if (with_raw) {
      p.flags |= kClockHasRaw;
      p.raw_tsc = r1 + wr / 2, p.raw_width_ticks = wr;
      p.raw_ns = c.raw(ld(r1) + ld(rng() % (wr + 1)));
    }
    pts.push_back(p);
  }
  return pts;
}

// Every stamp the kernel would give at random instants must lie in its bound.
uint64_t faulty_misses(const FaultyClock& c, const ClockMap& map, int n = 200000) {
  std::mt19937_64 rng(5);
  ld first = map.points().front().tsc, last = map.points().back().tsc;
  uint64_t miss = 0;
  for (int i = 0; i < n; ++i) {
    ld tau = first + (last - first) * ld(rng() % 1000000) / 1e6L;
    TscBounds b = map.mono_to_tsc_bounds(c.mono(tau));
    miss += !(ld(b.lo) <= tau && tau <= ld(b.hi));
  }
  return miss;
}

TEST(ClockBounds, StepsWithNoSyscallAreCaughtByRaw) {
  FaultyClock c;
  // The sizes seen to slip through unflagged before: 150-400 ns, and 3 us.
  for (auto [at_ms, ns] : {std::pair{1230.0L, 150.0L}, {2570.0L, 300.0L}, {4010.0L, 400.0L}, {5555.0L, 3000.0L}})
    c.steps.push_back({kTsc0 + at_ms * 1e6L * kHz, ns});
  ClockMap map(faulty_points(c, 7e9, 100e6));
  const RawWitness& w = map.raw_witness();
  printf("  [raw witness] %llu of %llu segments departed, largest %.0f ns beyond tolerance\n",
         (unsigned long long)w.departed, (unsigned long long)w.checked, double(w.largest_ns));
  EXPECT_EQ(w.departed, 4u);
  EXPECT_EQ(map.model_stats().departed, 4u * 3);  // each with its two neighbours
  EXPECT_EQ(map.model_stats().tsc_rate_changes, 0u) << "a step changes no rate: the line does not split";
  EXPECT_EQ(faulty_misses(c, map), 0u);
  // The same clock without RAW in its points: nothing flags the steps.
  ClockMap blind(faulty_points(c, 7e9, 100e6, false));
  EXPECT_EQ(blind.model_stats().departed, 0u);
  printf("  [raw witness] without RAW: %llu of 200000 stamps outside their bound\n",
         (unsigned long long)faulty_misses(c, blind));
}

// A live migration to a host without TSC scaling: the TSC's rate changes at one
// instant, mid-segment, and RAW follows one line before and another after. The
// line splits there: only the segment holding the change and its neighbours
// fall back, every stamp on both sides is inside its bound (checked on each
// side separately), and ns durations before, after and across the change hold
// their truth (RAW's ns, the second durations are in).
struct RateChangeRun {
  FaultyClock c;
  ClockMap map;
  ld change_tsc;
  explicit RateChangeRun(ld ppm, ld at_ns = 3.05e9L) : change_tsc(kTsc0 + at_ns * kHz) {
    c.rate_change_tsc = change_tsc, c.rate_change_ppm = ppm;
    map = ClockMap(faulty_points(c, 6e9, 100e6));
  }
  // Stamps at random true instants in [from, to) (TSC): how many are inside
  // their bound, and the median width in ns.
  std::pair<uint64_t, ld> stamps(ld from, ld to, int n) const {
    std::mt19937_64 rng(9);
    uint64_t in = 0;
    std::vector<ld> widths;
    for (int i = 0; i < n; ++i) {
      ld tau = from + (to - from) * ld(rng() % 1000000) / 1e6L;
      TscBounds b = map.mono_to_tsc_bounds(c.mono(tau));
      in += ld(b.lo) <= tau && tau <= ld(b.hi);
      widths.push_back(ld(b.hi - b.lo) / kHz);
    }
    std::nth_element(widths.begin(), widths.begin() + n / 2, widths.end());
    return {in, widths[n / 2]};
  }
  // The ns interval the map gives a duration between true instants t1 < t2 (as
  // offsets in ns from the start), from points [i, j], holds RAW's ns.
  bool duration_held(ld t1, ld t2, size_t i, size_t j) const {
    auto f = map.tsc_frequency(i, j);
    if (!f) return false;
    ld a = kTsc0 + t1 * kHz, b = kTsc0 + t2 * kHz, ticks = b - a;
    ld truth = c.ns_since_start(b) - c.ns_since_start(a);
    return ticks / ld(f->hi) * 1e9L <= truth && truth <= ticks / ld(f->lo) * 1e9L;
  }
};

void expect_split_at_the_change(ld ppm) {
  RateChangeRun r(ppm);
  const ClockModelStats& s = r.map.model_stats();
  const RawWitness& w = r.map.raw_witness();
  size_t last = r.map.points().size() - 1;
  EXPECT_EQ(s.tsc_rate_changes, 1u);
  ASSERT_EQ(w.rate_changes.size(), 1u);
  EXPECT_EQ(w.rate_changes[0], 30u) << "the change at 3.05 s lies between the points at 3.0 s and 3.1 s";
  ASSERT_EQ(w.pieces.size(), 2u);
  // RAW runs 1 - ppm slower per tick after the change: ticks per ns 1 / (1 - ppm).
  EXPECT_NEAR(w.pieces[1].hz / w.pieces[0].hz - 1, 1 / (1 - ppm * 1e-6L) - 1, 0.05e-6);
  EXPECT_EQ(w.departed, 1u);
  EXPECT_EQ(s.segments, 60u);
  EXPECT_LE(s.fallback(), 3u) << "only the segment holding the change and its neighbours";
  const int n = 100000;
  ld first = r.map.points().front().tsc, lastt = r.map.points().back().tsc;
  auto [in_before, w_before] = r.stamps(first, r.change_tsc, n);
  auto [in_after, w_after] = r.stamps(r.change_tsc, lastt, n);
  auto [in_near, w_near] = r.stamps(r.change_tsc - 0.2e9L * kHz, r.change_tsc + 0.2e9L * kHz, n);
  EXPECT_EQ(in_before, uint64_t(n));
  EXPECT_EQ(in_after, uint64_t(n));
  EXPECT_EQ(in_near, uint64_t(n));
  EXPECT_LT(w_before, 1000) << "the bounds away from the change stay tight";
  EXPECT_LT(w_after, 1000);
  printf(
      "  [tsc rate change %.0f ppm] fell back %llu of %llu segments (departed %llu, tsc_rate_changes %llu); "
      "median width before %.0f ns, after %.0f ns, within 0.2 s of it %.0f ns\n",
      double(ppm), (unsigned long long)s.fallback(), (unsigned long long)s.segments, (unsigned long long)s.departed,
      (unsigned long long)s.tsc_rate_changes, double(w_before), double(w_after), double(w_near));
  // Durations of 1-2 s before, after and across the change, as local_latency
  // takes them (the whole run's interval) and as translate does (the points
  // nearest the stretch's ends).
  EXPECT_TRUE(r.duration_held(0.5e9L, 2.5e9L, 0, last));
  EXPECT_TRUE(r.duration_held(3.5e9L, 5.5e9L, 0, last));
  EXPECT_TRUE(r.duration_held(2.0e9L, 4.0e9L, 0, last));
  EXPECT_TRUE(r.duration_held(0.5e9L, 2.5e9L, 5, 25));
  EXPECT_TRUE(r.duration_held(3.5e9L, 5.5e9L, 35, 55));
  EXPECT_TRUE(r.duration_held(2.0e9L, 4.0e9L, 20, 40));
  // The width that buys: the change's size, no more.
  auto f = r.map.tsc_frequency(0, last);
  ASSERT_TRUE(f);
  EXPECT_LT((f->hi - f->lo) / f->hz, ppm * 1e-6 * 1.1);
  nlohmann::json j = clock_model_json(r.map);
  EXPECT_EQ(j["tsc_rate_changes"], 1u);
  ASSERT_EQ(j["tsc_pieces"].size(), 2u);
  EXPECT_EQ(j["tsc_pieces"][1]["from_mono_ns"], r.map.points()[31].mono_ns);
}

TEST(ClockBounds, TscRateChangeOf30PpmSplitsTheRawLine) { expect_split_at_the_change(30); }

TEST(ClockBounds, TscRateChangeOf300PpmSplitsTheRawLine) { expect_split_at_the_change(300); }

// A migration there and back: two changes, two splits, three lines.
TEST(ClockBounds, TscRateChangeThereAndBackSplitsTwice) {
  RateChangeRun r(300, 2.05e9L);
  r.c.rate_back_tsc = kTsc0 + 4.05e9L * kHz;
  r.map = ClockMap(faulty_points(r.c, 6e9, 100e6));
  const ClockModelStats& s = r.map.model_stats();
  EXPECT_EQ(s.tsc_rate_changes, 2u);
  EXPECT_EQ(r.map.raw_witness().rate_changes, (std::vector<size_t>{20, 40}));
  EXPECT_LE(s.fallback(), 6u);
  EXPECT_EQ(faulty_misses(r.c, r.map), 0u);
  size_t last = r.map.points().size() - 1;
  EXPECT_TRUE(r.duration_held(2.5e9L, 3.5e9L, 0, last));
  EXPECT_TRUE(r.duration_held(1.0e9L, 5.0e9L, 10, 50));
  EXPECT_TRUE(r.duration_held(2.5e9L, 3.5e9L, 25, 35));
}

TEST(ClockBounds, UnfaultedRawDepartsNowhere) {
  FaultyClock c;
  ClockMap map(faulty_points(c, 30e9, 100e6));
  EXPECT_EQ(map.raw_witness().checked, 300u);
  EXPECT_EQ(map.raw_witness().departed, 0u);
  EXPECT_EQ(map.model_stats().departed, 0u);
  EXPECT_EQ(map.model_stats().tsc_rate_changes, 0u);
  EXPECT_EQ(map.raw_witness().pieces.size(), 1u);
}

// A clocksource that reads in 100 ns steps (Hyper-V's TSC page): with its
// quantum every stamp is inside its bound.
TEST(ClockBounds, CoarseReadingQuantumIsCarried) {
  FaultyClock c;
  c.quantum = 100;
  ClockMap map(faulty_points(c, 6e9, 100e6), {}, ClockReading{100, 100});
  EXPECT_EQ(map.raw_witness().departed, 0u);
  EXPECT_EQ(faulty_misses(c, map), 0u);
  ClockMap assumed_fine(faulty_points(c, 6e9, 100e6));
  printf("  [quantum 100 ns] assumed 1 ns: %llu of 200000 stamps outside their bound\n",
         (unsigned long long)faulty_misses(c, assumed_fine));
}

TEST(ClockQuantum, FromReads) {
  // A nanosecond clocksource read every ~25 ns: never the same value twice.
  EXPECT_EQ(quantum_from_reads({1000, 1024, 1051, 1077, 1102}, true), 1u);
  // Unknown clocksource, no repeat: at most the smallest advance.
  EXPECT_EQ(quantum_from_reads({1000, 1024, 1051, 1077, 1102}, false), 24u);
  // hpet (69.8 ns) read every ~25 ns: repeats, steps of 69 and 70.
  EXPECT_EQ(quantum_from_reads({1000, 1000, 1070, 1070, 1070, 1139, 1209}, true), 70u);
  // Hyper-V's 100 ns.
  EXPECT_EQ(quantum_from_reads({500, 500, 600, 600, 700}, false), 101u);
  EXPECT_EQ(quantum_from_reads({}, false), 1u);
  uint64_t here = measure_clock_quantum(CLOCK_MONOTONIC, current_clocksource());
  printf("  [quantum] this machine's CLOCK_MONOTONIC (%s): %llu ns\n", current_clocksource().c_str(),
         (unsigned long long)here);
  EXPECT_GE(here, 1u);
}

}  // namespace
}  // namespace cptrace
