// MinRTT poisoning on the namespace testbed, without a key: a forger in a
// neighbouring namespace answers A's probes for B with stamps from a clock that
// runs at another rate than B's own (a real responder, `minrttd --node B` with
// B's simulated clock plus extra ppm, offset matched to B's at the start: a
// rate-only forgery). How the forger gets A's probes (spoofing, replaying B's
// sequence numbers) is what authentication stops; here A is simply pointed at
// it, so A's rounds "with B" are all forged.
//
//  - 200 ppm, B's own rounds with A genuine (every node probes its peers): the
//    forged and the genuine rounds contradict each other; translate and latency
//    refuse, or warn with --accept-suspect-sync.
//  - 600 ppm, B probes nobody: the forged rounds are consistent with each other
//    but need a rate 600 ppm off what both nodes' own measured TSC frequencies
//    give; refused.
//
// Truth: the namespaces share one CLOCK_MONOTONIC; an event's true instant is its
// node's correlation stream inverted, so the figures printed with the override
// say how wrong the accepted bounds are.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "cptrace.h"
#include "test_util.h"
#include "truth_util.h"
#include "testbed_util.h"
#include "clock/clock_map.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testbed::skip_reason;

std::string in_ns(const std::string& ns, const std::string& cmd) { return "ip netns exec " + ns + " " + cmd; }

// Every command line of this file that runs MinRTT without a key goes through
// here (the one place to add an explicit opt-out when keys become mandatory).
// --insecure right after the subcommand (ARGS starts with it; a command may follow --).
std::string unkeyed_minrtt(const std::string& args) {
  size_t sp = args.find(' ');
  return testutil::cptrace_bin() + " " + args.substr(0, sp) + " --insecure" + args.substr(sp);
}

constexpr const char* kSimA = "1500000000,40";
constexpr int64_t kOffsetBNs = -2700000000;
constexpr double kSkewBPpm = -150;

// --simulate-clock for a forger whose clock equals B's at raw TSC `at` and runs
// extra_ppm faster (simulated clocks turn ns into ticks at the MHz-rounded rate).
std::string forger_clock(double hz, uint64_t at, double extra_ppm) {
  long double hz_r = std::round(hz / 1e6) * 1e6;
  long double off_b_ticks = std::llround((long double)kOffsetBNs * hz_r / 1e9L);
  long double off_f_ticks = off_b_ticks - (long double)at * extra_ppm * 1e-6L;
  return fmt::format("{},{}", (long long)std::llround(off_f_ticks * 1e9L / hz_r), kSkewBPpm + extra_ppm);
}

struct Poisoned {
  testutil::TempDir tmp;
  std::string a, b;
  testutil::RunResult translate(const std::string& extra) {
    return testutil::run(testutil::cptrace_bin() + " translate " + a + " " + b + " --reference A " + extra, tmp);
  }
};

// A records the pipeline's sender with the forger as its peer "B"; B records the
// receiver (probing A when b_probes). Both answer probes.
void record_poisoned(testbed::Testbed& tb, Poisoned& run, double extra_ppm, bool b_probes) {
  const std::string bin = testutil::cptrace_bin(), wl = (testutil::build_dir() / "tests" / "pipeline").string();
  ClockPoint now = sample_clock_point();
  usleep(100000);
  ClockPoint later = sample_clock_point();
  double hz = ClockMap({now, later}).tsc_hz();
  // Matched about when the recordings' start rounds run.
  uint64_t at = later.tsc + uint64_t(hz);
  testutil::Proc forger(in_ns(tb.ns(3), unkeyed_minrtt("minrttd --listen 10.77.3.2:7711 --node B --stats-interval 0 "
                                                       "--simulate-clock " +
                                                       forger_clock(hz, at, extra_ppm))),
                        run.tmp / "f.out", run.tmp / "f.err");
  ASSERT_TRUE(forger.wait_for("listening on 10.77.3.2:7711", 10)) << testutil::read_file(forger.err_path);
  const std::string common =
      " --no-progress --minrtt-listen 0.0.0.0:7711 --sync-rounds 50 --sync-rate 20 --sync-wait 20";
  run.b = run.tmp / "B", run.a = run.tmp / "A";
  std::string b_sim = fmt::format("{},{}", kOffsetBNs, kSkewBPpm);
  testutil::Proc b(
      in_ns(tb.ns(2), unkeyed_minrtt("record --node B" + common + (b_probes ? " --peers 10.77.1.2:7711" : "") +
                                     " --simulate-clock " + b_sim + " -o " + run.b + " -- " + wl +
                                     " --role C --listen 10.77.2.2:9000")),
      run.tmp / "b.out", run.tmp / "b.err");
  testutil::Proc a(in_ns(tb.ns(1), unkeyed_minrtt("record --node A --peers 10.77.3.2:7711" + common +
                                                  " --simulate-clock " + kSimA + " -o " + run.a + " -- " + wl +
                                                  " --role A --connect 10.77.2.2:9000 --tuples 800 --rate 200 "
                                                  "--connect-timeout 30")),
                   run.tmp / "a.out", run.tmp / "a.err");
  ASSERT_EQ(a.wait(180), 0) << testutil::read_file(a.err_path);
  ASSERT_EQ(b.wait(180), 0) << testutil::read_file(b.err_path);
  kill(forger.pid, SIGTERM);
  forger.wait(10);
  TraceReader ra(run.a);
  ASSERT_FALSE(ra.error());
  size_t with_b = 0;
  for (const SyncRound& r : ra.sync_rounds()) with_b += r.peer == "B" && r.kernel_ok;
  ASSERT_GE(with_b, 100u) << "A's rounds with the forger posing as B";
}

// With the override: how many tuples' truth the accepted bounds miss.
void print_containment(const Poisoned& run, const std::string& out, const char* label) {
  TraceReader ta(run.a), tb(run.b);
  auto pa = ta.clock_map().points(), pb = tb.clock_map().points();
  LatencyResult res = latency(out, "A.out", "C.in");
  TraceReader tr(out);
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> local;
  uint64_t c1 = cp_channel_id("A.out"), c2 = cp_channel_id("C.in");
  std::vector<TranslatedEvent> evs;
  tr.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs)
      if (e.channel == c1 || e.channel == c2) local[{e.channel, e.tuple}] = e.local_ts;
  });
  size_t outside = 0;
  std::vector<int64_t> width;
  for (const LatencyRow& row : res.rows) {
    long double ns = truth::interp(pb, (long double)local.at({c2, row.tuple}), true) -
                     truth::interp(pa, (long double)local.at({c1, row.tuple}), true);
    outside += ns < row.ns_lo || ns > row.ns_hi;
    width.push_back(row.ns_hi - row.ns_lo);
  }
  std::sort(width.begin(), width.end());
  printf("  [%s, accepted] truth outside the bound for %zu of %zu tuples; bound width median %lld ns\n", label, outside,
         res.rows.size(), width.empty() ? 0LL : (long long)width[width.size() / 2]);
}

TEST(SyncPoisoning, ForgedRoundsBesideGenuineOnesAreRefusedOrFlagged) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  testbed::Testbed tb("sp", 3, "--delay 30");
  ASSERT_TRUE(tb.ok()) << tb.output();
  Poisoned run;
  record_poisoned(tb, run, 200, true);
  if (HasFatalFailure()) return;
  for (const char* method : {"best", "hull", "ratio"}) {
    auto t = run.translate(std::string("--method ") + method + " -o " + (run.tmp / (std::string("o-") + method)));
    EXPECT_NE(t.status, 0) << method << "\n" << t.out;
    EXPECT_NE(t.err.find("A-B: MinRTT rounds contradict the nodes' own clocks"), std::string::npos)
        << method << ": " << t.err;
    EXPECT_NE(t.err.find("limit +-500 ppm"), std::string::npos) << t.err;
    printf("  [200 ppm beside genuine, %s] %s", method, t.err.c_str());
  }
  std::string out = run.tmp / "accepted";
  auto t = run.translate("--accept-suspect-sync -o " + out);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("WARNING suspect sync (accepted with --accept-suspect-sync), bounds through A-B NOT guaranteed"),
            std::string::npos)
      << t.out;
  auto l = testutil::run(testutil::cptrace_bin() + " latency " + out + " --from A.out --to C.in", run.tmp);
  EXPECT_NE(l.status, 0) << l.out;
  EXPECT_NE(l.err.find("A-B: MinRTT rounds contradict"), std::string::npos) << l.err;
  l = testutil::run(testutil::cptrace_bin() + " latency " + out + " --from A.out --to C.in --accept-suspect-sync",
                    run.tmp);
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("WARNING suspect sync"), std::string::npos) << l.out;
  print_containment(run, out, "200 ppm beside genuine");
}

TEST(SyncPoisoning, ConsistentForgeryBeyondTheNodesOwnRatesIsRefused) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  testbed::Testbed tb("sq", 3, "--delay 30");
  ASSERT_TRUE(tb.ok()) << tb.output();
  Poisoned run;
  record_poisoned(tb, run, 600, false);
  if (HasFatalFailure()) return;
  auto t = run.translate("-o " + (run.tmp / "o"));
  EXPECT_NE(t.status, 0) << t.out;
  EXPECT_NE(t.err.find("A-B: MinRTT rounds contradict the nodes' own clocks"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("limit +-500 ppm"), std::string::npos) << t.err;
  printf("  [600 ppm alone] %s", t.err.c_str());
  std::string out = run.tmp / "accepted";
  t = run.translate("--accept-suspect-sync -o " + out);
  ASSERT_EQ(t.status, 0) << t.err;
  printf("%s", t.out.c_str());
  auto j = nlohmann::json::parse(testutil::read_file(out + "/meta.json"));
  const auto& f = j["translated"]["suspect_sync"];
  ASSERT_EQ(f.size(), 1u);
  // What the rounds need lies between the limit and the forgery (plus round trips).
  EXPECT_GT(f[0]["ppm"].get<double>(), 500);
  EXPECT_LT(f[0]["ppm"].get<double>(), 700);
  print_containment(run, out, "600 ppm alone");
}

}  // namespace
}  // namespace cptrace
