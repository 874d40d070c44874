// Translation defends its bounds: MinRTT rounds that contradict each other or the
// nodes' own measured TSC frequencies are refused (sync_sanity.h), on synthetic
// recordings with known truth. The forged rounds are those of a responder whose
// clock runs at another rate than the node's own clock stream says, starting
// from the true offset (a rate-only forgery; offset forgeries cross the hulls at
// once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "synth_cluster.h"
#include "test_util.h"
#include "truth_util.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "translate/sync_sanity.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testutil::TempDir;
constexpr long double kSpan = 6e9L;  // 6 s
constexpr long double kRoundsFrom = 1e6L;  // where synth::Cluster::sync_all starts its rounds

synth::Clock clock_a() { return {"A", 1.0e15L, 20}; }
synth::Clock clock_b() { return {"B", 1.0e15L + 8.1e9L, -35}; }

// B's clock as a forger answers for it: extra_ppm faster, equal to B's at the first round.
synth::Clock forged_b(long double extra_ppm) {
  synth::Clock f = clock_b();
  f.skew_ppm += extra_ppm;
  f.offset -= f.f * extra_ppm * 1e-6L * kRoundsFrom;
  return f;
}

// 200 tuples A.out (on A) -> B.in (on B), 20 ms apart from 0.2 s.
void two_node_pipeline(synth::Cluster& cl) {
  for (uint64_t k = 0; k < 200; ++k) {
    long double t = 200e6L + k * 20e6L;
    cl.event(0, "A.out", k, t);
    cl.event(1, "B.in", k, t + cl.delay(0, 1));
  }
}

// Two nodes with honest clock streams and a pipeline A.out -> B.in. A's rounds
// with B are answered by a forger `extra_ppm` off B's rate; B's own rounds with A
// (when b_probes) are genuine.
std::vector<std::string> write_forged(const TempDir& tmp, long double extra_ppm, bool b_probes, uint64_t seed) {
  synth::Cluster honest({clock_a(), clock_b()}, seed), forged({clock_a(), forged_b(extra_ppm)}, seed);
  forged.sync_all({{0, 1}}, kSpan, 50);
  if (b_probes) honest.sync_all({{1, 0}}, kSpan, 50);
  honest.node_rounds(0) = forged.node_rounds(0);
  two_node_pipeline(honest);
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / honest.clock(i).name);
    honest.write(i, dirs.back(), kSpan);
  }
  return dirs;
}

TEST(TranslateSuspectSync, RateOf600PpmAgainstTheNodesOwnFrequenciesIsRefused) {
  TempDir tmp;
  auto dirs = write_forged(tmp, 600, false, 21);
  for (const char* method : {"ratio", "hull", "best"}) {
    std::string e = truth::translate_error({dirs, "A", tmp / (std::string("o-") + method), parse_method(method), true});
    EXPECT_NE(e.find("A-B: MinRTT rounds contradict the nodes' own clocks"), std::string::npos) << method << ": " << e;
    EXPECT_NE(e.find("limit +-500 ppm"), std::string::npos) << e;
    EXPECT_NE(e.find("--accept-suspect-sync"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(tmp / (std::string("o-") + method) + "/meta.json"))
        << "nothing is written when translate refuses";
  }
  // The needed rate is measured, not assumed: between the limit and the forgery.
  TranslateOptions o{dirs, "A", tmp / "accepted", Method::Best, true};
  o.accept_suspect_sync = true;
  TranslateSummary s = translate(o);
  const auto& f = s.meta["translated"]["suspect_sync"];
  ASSERT_EQ(f.size(), 1u) << s.meta.dump(2);
  EXPECT_EQ(f[0]["kind"], "rate-beyond-limit");
  EXPECT_EQ(f[0]["pair"], "A-B");
  double ppm = f[0]["ppm"].get<double>();
  EXPECT_GT(ppm, 500);
  EXPECT_LE(ppm, 600 + 50) << "a pair of rounds cannot need more than the forgery plus its round trips";
  // The line through all the rounds says the forged rate, 600 ppm off.
  const auto& c = s.meta["translated"]["sync_check"][0];
  ASSERT_TRUE(c.contains("line_rate_ppm")) << c.dump();
  EXPECT_LE(c["line_rate_ppm"][0].get<double>(), 600);
  EXPECT_GE(c["line_rate_ppm"][1].get<double>(), 600);
  printf("  [600 ppm forged] worst pair needs %+.1f ppm; line through the rounds %+.1f..%+.1f ppm\n", ppm,
         c["line_rate_ppm"][0].get<double>(), c["line_rate_ppm"][1].get<double>());
}

TEST(TranslateSuspectSync, RateOf50PpmIsAccepted) {
  TempDir tmp;
  auto dirs = write_forged(tmp, 50, false, 22);
  for (const char* method : {"ratio", "hull", "best"}) {
    TranslateSummary s = translate({dirs, "A", tmp / (std::string("o-") + method), parse_method(method), true});
    EXPECT_FALSE(s.meta["translated"].contains("suspect_sync")) << method << s.meta["translated"].dump(2);
    const auto& c = s.meta["translated"]["sync_check"];
    ASSERT_EQ(c.size(), 1u);
    EXPECT_TRUE(c[0]["findings"].empty());
    EXPECT_LE(c[0]["line_rate_ppm"][0].get<double>(), 50);
    EXPECT_GE(c[0]["line_rate_ppm"][1].get<double>(), 50);
  }
}

// Honest rounds both ways: the rate the rounds give agrees with the frequencies to
// within the rounds' own precision (the check passes with margin, not by luck).
TEST(TranslateSuspectSync, HonestRoundsAgreeWithTheNodesFrequencies) {
  TempDir tmp;
  synth::Cluster cl({clock_a(), clock_b()}, 23);
  cl.sync_all({{0, 1}, {1, 0}}, kSpan, 50);
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    cl.write(i, dirs.back(), kSpan);
  }
  TranslateSummary s = translate({dirs, "A", tmp / "o", Method::Best, true});
  const auto& c = s.meta["translated"]["sync_check"][0];
  EXPECT_TRUE(c["findings"].empty());
  EXPECT_LE(c["line_rate_ppm"][0].get<double>(), 0);
  EXPECT_GE(c["line_rate_ppm"][1].get<double>(), 0);
  EXPECT_LT(c["line_rate_ppm"][1].get<double>() - c["line_rate_ppm"][0].get<double>(), 100);
}

// A forger 200 ppm off (within what two crystals can do) answers A while B's own
// rounds are genuine: the two sets cross, and no rate within the limit explains
// rounds a few ms apart that disagree by hundreds of us.
TEST(TranslateSuspectSync, CrossingHullsOfForgedAndGenuineRoundsAreRefused) {
  TempDir tmp;
  auto dirs = write_forged(tmp, 200, true, 24);
  for (const char* method : {"ratio", "hull", "best"}) {
    std::string e = truth::translate_error({dirs, "A", tmp / (std::string("o-") + method), parse_method(method), true});
    EXPECT_NE(e.find("A-B: MinRTT rounds contradict the nodes' own clocks"), std::string::npos) << method << ": " << e;
    EXPECT_NE(e.find("initiated by A"), std::string::npos) << e;
    EXPECT_NE(e.find("initiated by B"), std::string::npos) << e << ": the pair is one forged and one genuine round";
  }
}

// A real change of rate within the limit (300 ppm mid-run) is a non-linear clock,
// not a forgery: the hull method splits the span and best follows it, while the
// ratio method's one line over the span is refused.
TEST(TranslateSuspectSync, CrossingHullsNotSplitByTheRatioMethodAreRefused) {
  TempDir tmp;
  synth::Clock b = clock_b();
  b.kink_ns = 3e9L, b.kink_ppm = 300;
  synth::Cluster cl({clock_a(), b}, 25);
  cl.sync_all({{0, 1}, {1, 0}}, kSpan, 50, 100e6L);
  two_node_pipeline(cl);
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    cl.write(i, dirs.back(), kSpan);
  }
  std::string e = truth::translate_error({dirs, "A", tmp / "o-ratio", Method::Ratio, true});
  EXPECT_NE(e.find("A-B: the rounds' convex hulls cross"), std::string::npos) << e;
  EXPECT_EQ(e.find("contradict the nodes' own clocks"), std::string::npos) << "300 ppm is within the limit: " << e;
  for (const char* method : {"hull", "best"}) {
    TranslateSummary s = translate({dirs, "A", tmp / (std::string("o-") + method), parse_method(method), true});
    EXPECT_FALSE(s.meta["translated"].contains("suspect_sync")) << method;
    // Outside the reported transitions every instant's bound holds (best no longer
    // intersects the ratio's contradicted line).
    std::vector<std::pair<int64_t, int64_t>> tr;
    for (const auto& p : s.meta["translated"]["pairs"])
      if (p["from"] == "B") tr = p["hull"]["transitions"].get<std::vector<std::pair<int64_t, int64_t>>>();
    ASSERT_FALSE(tr.empty()) << method;
    TraceReader r(tmp / (std::string("o-") + method));
    size_t checked = 0;
    r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
      std::vector<TranslatedEvent> evs;
      decode_translated(h, p.data(), p.size(), evs);
      for (const TranslatedEvent& ev : evs) {
        bool in_tr = ev.node == 1 && std::any_of(tr.begin(), tr.end(), [&](auto& t) {
                       return int64_t(ev.local_ts) >= t.first && int64_t(ev.local_ts) <= t.second;
                     });
        if (in_tr) continue;
        long double truth = cl.truth_ref(ev.node, ev.local_ts, 0);
        EXPECT_TRUE(truth >= ev.ref_lo && truth <= ev.ref_hi) << method << " node " << ev.node << " ts " << ev.local_ts;
        checked++;
      }
    });
    EXPECT_GT(checked, 100u) << method;
  }
}

// latency on a trace translated with --accept-suspect-sync: refused unless
// accepted again, then one WARNING line per finding.
TEST(TranslateSuspectSync, LatencyRefusesOrWarnsOnAnAcceptedSuspectTrace) {
  TempDir tmp;
  auto dirs = write_forged(tmp, 600, false, 26);
  const std::string bin = testutil::cptrace_bin();
  auto t = testutil::run(bin + " translate " + dirs[0] + " " + dirs[1] + " --reference A -o " + (tmp / "o"), tmp);
  EXPECT_NE(t.status, 0);
  EXPECT_NE(t.err.find("limit +-500 ppm"), std::string::npos) << t.err;
  t = testutil::run(
      bin + " translate " + dirs[0] + " " + dirs[1] + " --reference A --accept-suspect-sync -o " + (tmp / "o"), tmp);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("WARNING suspect sync (accepted with --accept-suspect-sync), bounds through A-B NOT guaranteed"),
            std::string::npos)
      << t.out;
  auto l = testutil::run(bin + " latency " + (tmp / "o") + " --from A.out --to B.in", tmp);
  EXPECT_NE(l.status, 0);
  EXPECT_NE(l.err.find("A-B: MinRTT rounds contradict"), std::string::npos) << l.err;
  EXPECT_EQ(l.out.find("p50"), std::string::npos) << "no bounds printed: " << l.out;
  l = testutil::run(bin + " latency " + (tmp / "o") + " --from A.out --to B.in --accept-suspect-sync", tmp);
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("200 tuples"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("WARNING suspect sync"), std::string::npos) << l.out;
  // The report of such a trace says it beside the remote latency plot.
  auto rep = testutil::run(bin + " report " + (tmp / "o") + " -o " + (tmp / "r.html") + " --pair A.out,B.in", tmp);
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(testutil::read_file(tmp / "r.html").find("WARNING suspect sync, bounds through A-B NOT guaranteed"),
            std::string::npos);
}

// The pairwise test itself on hand-made points: a rate exactly at the limit
// passes, just beyond it is caught.
TEST(TranslateSuspectSync, LimitIsExactOnTwoRounds) {
  auto round = [](int64_t x, int64_t y, int64_t rtt) {
    PairRound r;
    r.phase = "start";
    r.x_initiated = true;
    r.t1 = x - rtt / 2, r.t4 = x + rtt / 2, r.t2 = y, r.t3 = y;
    return r;
  };
  const int64_t D = 1000000000;  // 1e9 ticks apart
  RateInterval hz{1, 1};
  // Rounds with a 1000-tick round trip, D apart: a rate above 1 needs the pair
  // D + 1000 ticks apart, a rate below 1 the pair D - 1000 apart, so the least
  // rate they need is (1 + ppm) / (1 +- 1e-6).
  for (auto [ppm, refused] : std::vector<std::pair<int64_t, bool>>{
           {499, false}, {501, false}, {-499, false}, {502, true}, {-502, true}, {5000, true}}) {
    std::vector<PairRound> rs = {round(0, 0, 1000), round(D, D + ppm * (D / 1000000), 1000)};
    SyncCheck c = check_pair_sync(rs, "X", "Y", hz, hz);
    ASSERT_EQ(!c.findings.empty(), refused) << ppm;
    double need = ((1 + ppm * 1e-6) / (1 + (ppm > 0 ? 1e-6 : -1e-6)) - 1) * 1e6;
    if (refused) {
      EXPECT_NEAR(c.findings[0].ppm, need, 0.01) << c.findings[0].message;
    }
  }
}

// Two rounds that put one instant of X both after and before the same instant of
// Y: no rate explains them; the finding survives meta.json (an infinite ppm).
TEST(TranslateSuspectSync, ContradictionAtOneInstantIsNamedAndSurvivesJson) {
  PairRound a, b;
  a.phase = b.phase = "start";
  a.seq = 7, b.seq = 8;
  a.x_initiated = b.x_initiated = true;
  a.t1 = 90, a.t2 = 490, a.t3 = 500, a.t4 = 100;  // Y sent at 500, X received at 100: f(100) >= 500
  b.t1 = 100, b.t2 = 400, b.t3 = 400, b.t4 = 110;  // X sent at 100, Y received at 400: f(100) <= 400
  SyncCheck c = check_pair_sync({a, b}, "X", "Y", {1, 1}, {1, 1});
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].message.find("round seq 7 (start, initiated by X) and round seq 8"), std::string::npos)
      << c.findings[0].message;
  EXPECT_NE(c.findings[0].message.find("contradict each other at one instant"), std::string::npos);
  SyncFinding back = SyncFinding::from_json(nlohmann::json::parse(c.findings[0].to_json().dump()));
  EXPECT_TRUE(std::isinf(back.ppm));
  EXPECT_EQ(back.message, c.findings[0].message);
}

// B's CLOCK_MONOTONIC slewed like chrony's tick slew: 2 % fast from 1 s to 4 s of
// the 6 s recording (its TSC rate against MONOTONIC over the rounds' span is 1 %
// off), while CLOCK_MONOTONIC_RAW stays linear.
long double tick_slewed(long double t) { return t + 0.02L * std::clamp(t - 1e9L, 0.0L, 3e9L); }

std::vector<std::string> write_slewed(const TempDir& tmp, bool raw_points, long double forged_ppm, uint64_t seed) {
  synth::Cluster honest({clock_a(), clock_b()}, seed), forged({clock_a(), forged_b(forged_ppm)}, seed);
  honest.mono_of[1] = tick_slewed;
  honest.raw_points = raw_points;
  honest.sync_all({{0, 1}, {1, 0}}, kSpan, 50);
  if (forged_ppm != 0) {
    forged.sync_all({{0, 1}}, kSpan, 50);
    honest.node_rounds(0) = forged.node_rounds(0);
  }
  two_node_pipeline(honest);
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / honest.clock(i).name);
    honest.write(i, dirs.back(), kSpan);
  }
  return dirs;
}

// Honest rounds while B's MONOTONIC is tick-slewed by 2 %: measured against RAW,
// B's own TSC rate is the crystal's and the rounds agree with it.
TEST(SyncSanity, TickSlewOfMonotonicDoesNotRefuseHonestRoundsWithRaw) {
  TempDir tmp;
  auto dirs = write_slewed(tmp, true, 0, 31);
  TranslateSummary s = translate({dirs, "A", tmp / "o", Method::Best, true});
  const auto& c = s.meta["translated"]["sync_check"][0];
  EXPECT_TRUE(c["findings"].empty()) << c.dump(2);
  EXPECT_EQ(c["rate_clock"], "monotonic_raw");
  EXPECT_FALSE(c.contains("rate_clock_note"));
  EXPECT_FALSE(s.meta["translated"].contains("suspect_sync"));
}

// The same recording with version-1 points (no RAW): the check falls back to
// MONOTONIC, says so, and the slew (1 % over the span) makes it refuse: what the
// RAW points are for.
TEST(SyncSanity, WithoutRawTheCheckFallsBackToMonotonicAndSaysSo) {
  TempDir tmp;
  auto dirs = write_slewed(tmp, false, 0, 32);
  std::string e = truth::translate_error({dirs, "A", tmp / "o", Method::Best, true});
  EXPECT_NE(e.find("MinRTT rounds contradict the nodes' own clocks"), std::string::npos) << e;
  TranslateOptions o{dirs, "A", tmp / "accepted", Method::Best, true};
  o.accept_suspect_sync = true;
  TranslateSummary s = translate(o);
  const auto& c = s.meta["translated"]["sync_check"][0];
  EXPECT_EQ(c["rate_clock"], "monotonic");
  ASSERT_TRUE(c.contains("rate_clock_note")) << c.dump(2);
  EXPECT_NE(c["rate_clock_note"].get<std::string>().find("A's and B's TSC rates are measured against CLOCK_MONOTONIC"),
            std::string::npos)
      << c["rate_clock_note"];
}

// RAW does not blind the check: a forger answering 600 ppm off B's rate while B's
// MONOTONIC is slewed is still refused.
TEST(SyncSanity, ForgedRoundsAreStillRefusedUnderATickSlew) {
  TempDir tmp;
  auto dirs = write_slewed(tmp, true, 600, 33);
  std::string e = truth::translate_error({dirs, "A", tmp / "o", Method::Best, true});
  EXPECT_NE(e.find("A-B: MinRTT rounds contradict the nodes' own clocks"), std::string::npos) << e;
}

// stream_rate itself: RAW when both points carry it, MONOTONIC otherwise.
TEST(SyncSanity, StreamRateUsesRawWhenThePointsCarryIt) {
  ClockPoint a{1000, 1000, 10, 0}, b{2001000, 1041000, 10, 0};  // MONO 4 % slewed: 1040000 ns for 2e6 ticks
  RateInterval mono = stream_rate({a, b}, 1000, 2001000);
  EXPECT_FALSE(mono.raw);
  EXPECT_LT(mono.hi, 2.0L * 0.97L);
  for (ClockPoint* p : {&a, &b}) p->flags = kClockHasRaw, p->raw_tsc = p->tsc, p->raw_width_ticks = 10;
  a.raw_ns = 500, b.raw_ns = 1000500;  // 2 ticks per ns exactly
  RateInterval raw = stream_rate({a, b}, 1000, 2001000);
  EXPECT_TRUE(raw.raw);
  EXPECT_LE(raw.lo, 2.0L);
  EXPECT_GE(raw.hi, 2.0L);
  EXPECT_LT(raw.hi - raw.lo, 1e-4L);
}

}  // namespace
}  // namespace cptrace
