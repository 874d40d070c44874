// End to end on the namespace testbed, with clocks that change rate mid-run: two
// nodes record the pipeline workload in echo mode (tuples A -> B and back, so TCP
// data flows both ways) with `record --net --netns self --peers` (MinRTT rounds at
// start and stop only) and simulated clocks: A at +20 ppm, B at +50 ppm until the
// middle of the run and -30 ppm after. `translate --clock-model piecewise` with the
// rounds only, the traffic only and both must bound every event of B on A's clock
// (100 % containment), and the bound width over time is printed for each.
//
// Truth as in test_translate_e2e.cpp: every namespace shares one CLOCK_MONOTONIC,
// and a node's timestamps are its simulated TSC through its own correlation stream.
//
// The run lasts CPTRACE_DRIFT_SECONDS (default 30 s in `make test`); bench/run.sh
// runs it for 300 s and prints the same table.
#include <gtest/gtest.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "cptrace.h"
#include "test_util.h"
#include "truth_util.h"
#include "testbed_util.h"
#include "clock/clock_transform.h"
#include "trace/trace_reader.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testbed::skip_reason;
using testbed::Testbed;

double tsc_hz() {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  uint64_t c1 = __rdtsc();
  return double(c1 - c0) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(TranslateDriftE2E, RateChangeMidRunContainedWithRoundsTrafficAndBoth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  const char* env = getenv("CPTRACE_DRIFT_SECONDS");
  const double secs = env ? atof(env) : 30;
  ASSERT_GE(secs, 5) << "CPTRACE_DRIFT_SECONDS";
  const double rate = 200;  // tuples per second each way
  const uint64_t tuples = uint64_t(secs * rate);
  Testbed tb("dr", 2, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin(), wl = (testutil::build_dir() / "tests" / "pipeline").string();
  // B changes rate about half-way through the run (the recorders start within a second).
  uint64_t change = __rdtsc() + uint64_t(tsc_hz() * (secs / 2 + 3));
  const std::string sims[] = {"1500000000,20", "-2700000000,50," + std::to_string(change) + ",-30"};
  const std::string peers[] = {"10.77.2.2:7711", "10.77.1.2:7711"};
  const std::string roles[] = {"--role A --connect 10.77.2.2:9000 --echo --connect-timeout 30 --tuples " +
                                   std::to_string(tuples) + " --rate " + std::to_string(int(rate)),
                               "--role B --listen 10.77.2.2:9000 --echo"};
  const char* names[] = {"A", "B"};
  auto kg = testutil::run(bin + " keygen -o " + (tmp / "key"), tmp);  // one key, shared by both nodes
  ASSERT_EQ(kg.status, 0) << kg.err;
  std::vector<std::unique_ptr<testutil::Proc>> rec;
  for (int k = 1; k >= 0; --k)  // B first: A connects to it
    rec.push_back(std::make_unique<testutil::Proc>(
        "ip netns exec " + tb.ns(k + 1) + " " + bin + " record --no-progress --net --netns self --node " + names[k] +
            " --peers " + peers[k] + " --key " + (tmp / "key") + " --sync-rounds 40 --sync-wait 20 --simulate-clock " +
            sims[k] + " -o " + (tmp / names[k]) + " -- " + wl + " " + roles[k],
        tmp / (std::string(names[k]) + ".out"), tmp / (std::string(names[k]) + ".err")));
  for (auto& p : rec) ASSERT_EQ(p->wait(secs + 180), 0) << testutil::read_file(p->err_path);

  std::vector<std::vector<ClockPoint>> clock;
  for (const char* n : names) {
    TraceReader r(tmp / n);
    if (std::string(n) == "B") {  // the rate change happened inside B's recording
      ClockTransform sim = ClockTransform::from_json(r.meta().value("simulated_clock", nlohmann::json()));
      ASSERT_TRUE(sim.has_change);
      EXPECT_GT(sim.apply(change), r.clock_map().points().front().tsc + uint64_t(tsc_hz() * secs / 4));
      EXPECT_LT(sim.apply(change), r.clock_map().points().back().tsc - uint64_t(tsc_hz() * secs / 4));
    }
    ASSERT_FALSE(r.error()) << r.error()->what();
    ASSERT_GE(r.clock_map().points().size(), 2u);
    // B's simulated TSC changed its rate against the real CLOCK_MONOTONIC_RAW:
    // the RAW line splits there once (clock/raw_witness.h); A's did not.
    const ClockModelStats& st = r.clock_map().model_stats();
    printf("  [drift e2e] %s: %llu of %llu segments fell back (%llu departed), %llu TSC rate changes\n", n,
           (unsigned long long)st.fallback(), (unsigned long long)st.segments, (unsigned long long)st.departed,
           (unsigned long long)st.tsc_rate_changes);
    EXPECT_EQ(st.tsc_rate_changes, std::string(n) == "B" ? 1u : 0u) << n;
    ASSERT_GT(r.net_event_count(), tuples) << n << " captured no traffic";
    for (const SyncRound& s : r.sync_rounds()) ASSERT_NE(s.phase, "stream");
    clock.push_back(r.clock_map().points());
  }
  const uint64_t b_start = clock[1].front().tsc;
  const double b_hz = (double)(clock[1].back().tsc - clock[1].front().tsc) /
                      (double)(clock[1].back().mono_ns - clock[1].front().mono_ns) * 1e9;
  auto truth = [&](uint64_t b_ts) {
    return truth::interp(clock[0], truth::interp(clock[1], (long double)b_ts, true), false);
  };

  for (const char* inputs : {"rounds", "traffic", "both"}) {
    std::string out = tmp / (std::string("tr-") + inputs);
    auto t = testutil::run(bin + " translate " + (tmp / "A") + " " + (tmp / "B") +
                               " --reference A --clock-model piecewise --inputs " + inputs + " -o " + out,
                           tmp);
    ASSERT_EQ(t.status, 0) << t.out << t.err;
    EXPECT_NE(t.out.find(std::string("bounded by ") + inputs), std::string::npos) << t.out;
    TraceReader r(out);
    std::vector<TranslatedEvent> evs;
    size_t checked = 0, contained = 0;
    std::map<int, int64_t> widest;  // per 10 % of the run: the widest bound (ticks)
    r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
      decode_translated(h, p.data(), p.size(), evs);
      for (const TranslatedEvent& e : evs) {
        if (e.node != 1) continue;
        long double tr = truth(e.local_ts);
        bool ok = tr >= e.ref_lo && tr <= e.ref_hi;
        contained += ok, checked++;
        EXPECT_TRUE(ok) << inputs << " B ts " << e.local_ts << " [" << e.ref_lo << ", " << e.ref_hi << "] truth "
                        << (double)tr;
        int slice = int(10.0 * double(e.local_ts - b_start) / b_hz / secs);
        widest[slice] = std::max(widest[slice], e.ref_hi - e.ref_lo);
      }
    });
    EXPECT_EQ(checked, 2 * tuples) << inputs;
    printf("  [drift e2e, %.0f s, %s] contained %zu / %zu; widest bound per tenth of the run (us):", secs, inputs,
           contained, checked);
    for (auto& [s, w] : widest) printf(" %.1f", double(w) / b_hz * 1e6);
    printf("\n");
    if (std::string(inputs) == "both") {
      auto rep = testutil::run(bin + " report " + out + " --pair A.out,B.in -o " + (tmp / "report.html"), tmp);
      EXPECT_EQ(rep.status, 0) << rep.out << rep.err;
      EXPECT_NE(testutil::read_file(tmp / "report.html").find("\"width_over_time\":[["), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cptrace
