// End to end on the namespace testbed: three nodes, each recording the pipeline
// workload (A -> B -> C over TCP) with `cptrace record --peers ... --simulate-clock`
// (seconds of offset, tens to hundreds of ppm), an asymmetric link; then
// `cptrace translate` (every method) and `cptrace latency`. Every reported bound
// must contain the truth.
//
// Truth: all namespaces share one CLOCK_MONOTONIC, and every timestamp a node
// writes is its (simulated) TSC obtained through its own correlation stream. So
// an event's true instant is its node's stream inverted (TSC -> mono, exact
// long-double interpolation), and its true value on the reference's TSC is the
// reference's stream at that instant. Undoing the known transforms (meta.json
// "simulated_clock") gives the same physical TSC on every node, which is checked
// as well, so the transforms were really applied and are consistent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "clock/clock_transform.h"
#include "cptrace.h"
#include "latency/latency.h"
#include "pipeline_util.h"
#include "test_util.h"
#include "truth_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testbed::skip_reason;
using testbed::Testbed;

struct Node {
  std::string name;
  std::vector<ClockPoint> clock;
  ClockTransform sim;
};

// Which channel lives on which node.
int node_of(const std::string& channel) { return channel[0] - 'A'; }

bool record_supports_peers() {
  testutil::TempDir tmp;
  auto r = testutil::run(testutil::cptrace_bin() + " record --help", tmp);
  return r.out.find("--peers") != std::string::npos && r.out.find("--simulate-clock") != std::string::npos;
}

TEST(TranslateE2E, ThreeNodePipelineEveryBoundContainsTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  if (!record_supports_peers())
    GTEST_SKIP() << "SKIPPED: `cptrace record` has no --peers/--simulate-clock (MinRTT branch not merged)";
  Testbed tb("tr", 3, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  auto kg = testutil::run(testutil::cptrace_bin() + " keygen -o " + (tmp / "key"),
                          tmp);  // one key, shared by the three nodes
  ASSERT_EQ(kg.status, 0) << kg.err;
  auto rec = testutil::start_three_node_pipeline(
      tb, tmp, {tmp.path.string(), tmp / "key", 2000, "--sync-rounds 60 --sync-wait 20"});
  const char* names[] = {"A", "B", "C"};
  for (auto& p : rec) {
    int st = p->wait(180);
    ASSERT_EQ(st, 0) << testutil::read_file(p->err_path);
  }
  std::vector<Node> nodes;
  for (const char* n : names) {
    TraceReader r(tmp / n);
    ASSERT_FALSE(r.error()) << r.error()->what();
    Node node{n, r.clock_map().points(),
              ClockTransform::from_json(r.meta().value("simulated_clock", nlohmann::json()))};
    ASSERT_TRUE(node.sim.enabled) << n << ": meta.json lacks simulated_clock";
    ASSERT_GE(node.clock.size(), 2u);
    ASSERT_FALSE(r.sync_rounds().empty()) << n << " has no MinRTT rounds";
    nodes.push_back(node);
  }
  const Node& ref = nodes[0];
  // The correlation streams are as exact as their points' bracket widths (how long it
  // took this machine to read both clocks): a tuple's truth goes through two
  // interpolations at each end (node -> monotonic -> reference), each off by at most
  // the widest bracket.
  uint32_t widest = 0;
  for (const Node& n : nodes)
    for (const ClockPoint& p : n.clock) widest = std::max(widest, p.width_ticks);
  const long double stream_precision = 4.0L * widest + 1;
  auto truth_ticks = [&](int node, uint64_t ts) {
    return truth::interp(ref.clock, truth::interp(nodes[node].clock, (long double)ts, true), false);
  };
  auto truth_ns = [&](int node, uint64_t ts) { return truth::interp(nodes[node].clock, (long double)ts, true); };
  // Physical TSC after undoing the transform, continuous: (sim - offset) / (1 + skew).
  auto physical = [&](int node, uint64_t ts) {
    const ClockTransform& s = nodes[node].sim;
    return ((long double)ts - s.offset_ticks) / (1 + (long double)s.skew_ppb / 1e9L);
  };

  const std::pair<std::string, std::string> hops[] = {
      {"A.out", "B.in"}, {"B.in", "B.out"}, {"B.out", "C.in"}, {"A.out", "C.in"}};
  for (const char* method : {"ratio", "hull", "best"}) {
    std::string out = tmp / (std::string("tr-") + method);
    auto t =
        testutil::run(testutil::translate_three_nodes(tmp.path.string(), std::string("--method ") + method, out), tmp);
    ASSERT_EQ(t.status, 0) << t.out << t.err;
    printf("%s", t.out.c_str());
    EXPECT_EQ(t.err.find("unauthenticated"), std::string::npos) << "keyed rounds: " << t.err;
    {  // One kernel, one CLOCK_REALTIME: every node's measured offset to A must hold 0.
      TraceReader tr(out);
      const auto& offs = tr.meta()["translated"]["realtime_offsets"];
      ASSERT_EQ(offs.size(), 2u) << method;
      for (const auto& o : offs) {
        EXPECT_GT(o["samples"].get<uint64_t>(), 10u) << o.dump();
        EXPECT_LE(o["offset_lo_ns"].get<int64_t>(), 0) << o.dump();
        EXPECT_GE(o["offset_hi_ns"].get<int64_t>(), 0) << o.dump();
        EXPECT_EQ(o["at_least_ns"].get<int64_t>(), 0) << "an interval without 0: " << o.dump();
      }
    }
    for (auto& [c1, c2] : hops) {
      LatencyResult res = latency(out, c1, c2);
      EXPECT_EQ(res.rows.size(), 2000u) << c1 << "->" << c2;
      EXPECT_TRUE(res.unauthenticated.empty());
      std::map<std::string, std::vector<int64_t>> widths;
      size_t contained = 0;
      long double max_physical_gap = 0;
      // Re-read the translated events to know each tuple's local stamps.
      TraceReader tr(out);
      std::map<std::pair<uint64_t, uint64_t>, uint64_t> local;  // (channel, tuple) -> local ts
      uint64_t ch1 = cp_channel_id(c1.c_str()), ch2 = cp_channel_id(c2.c_str());
      std::vector<TranslatedEvent> evs;
      tr.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
        decode_translated(h, p.data(), p.size(), evs);
        for (const TranslatedEvent& e : evs)
          if (e.channel == ch1 || e.channel == ch2) local[{e.channel, e.tuple}] = e.local_ts;
      });
      for (const LatencyRow& row : res.rows) {
        uint64_t a = local.at({ch1, row.tuple}), b = local.at({ch2, row.tuple});
        int na = node_of(c1), nb = node_of(c2);
        long double t = na == 0 && nb == 0 ? (long double)(int64_t(b - a)) : truth_ticks(nb, b) - truth_ticks(na, a);
        long double ns = truth_ns(nb, b) - truth_ns(na, a);
        // The transforms, undone, agree with the streams to well under a microsecond.
        long double phys = physical(nb, b) - physical(na, a);
        long double via_ref = phys * (1 + (long double)ref.sim.skew_ppb / 1e9L);
        max_physical_gap = std::max(max_physical_gap, std::fabs(via_ref - t));
        bool ok = t >= row.ticks_lo && t <= row.ticks_hi && ns >= row.ns_lo && ns <= row.ns_hi;
        contained += ok;
        EXPECT_TRUE(ok) << method << " " << c1 << "->" << c2 << " tuple " << row.tuple << " " << row.scenario
                        << " ticks [" << row.ticks_lo << ", " << row.ticks_hi << "] truth " << (double)t << " ns ["
                        << row.ns_lo << ", " << row.ns_hi << "] truth " << (double)ns;
        widths[row.scenario].push_back(row.ns_hi - row.ns_lo);
      }
      EXPECT_LE(max_physical_gap, stream_precision) << "undone transforms disagree with the correlation streams";
      printf("  [e2e %s] %s -> %s: undone transforms within %.0f ticks of the streams (precision %.0f)\n", method,
             c1.c_str(), c2.c_str(), (double)max_physical_gap, (double)stream_precision);
      for (auto& [sc, v] : widths) {
        std::sort(v.begin(), v.end());
        printf("  [e2e %s] %-6s -> %-6s %-22s n=%4zu contained %zu  width median %7lld ns max %7lld ns\n", method,
               c1.c_str(), c2.c_str(), sc.c_str(), v.size(), contained, (long long)v[v.size() / 2],
               (long long)v.back());
      }
    }
  }
}

}  // namespace
}  // namespace cptrace
