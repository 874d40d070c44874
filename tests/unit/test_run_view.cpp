// The live view of a run (analyze/run_view.h) on synthetic node traces with
// exact truth: events go on well past the last MinRTT round (no stop rounds), so
// their bounds come from the drift bound's extrapolation; every percentile bound
// must hold the true percentile, and the view must equal `translate --clock-model
// piecewise --inputs rounds` + `latency` value for value, for a remote pair
// (reference-remote) and a pair on two non-reference nodes (remote-remote).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "analyze/run_view.h"
#include "analyze/top.h"
#include "synth_cluster.h"
#include "test_util.h"
#include "latency/latency.h"
#include "tables/rank_select.h"
#include "translate/translate.h"
#include "trace/trace_format.h"

namespace cptrace {
namespace {

const char* kQuantiles[] = {"p50", "p90", "p99", "max"};
const double kQ[] = {0.5, 0.9, 0.99, 1.0};

// The run of three nodes whose TSCs tick at f[i] ticks per ns; the view's snapshot
// in s, every percentile bound checked against the truth and against translate.
void view_equals_translate(const testutil::TempDir& tmp, const std::array<long double, 3>& f, nlohmann::json& s,
                           RunViewOptions& o) {
  synth::Clock a{"A", 1.0e15L, 20, INFINITY, 0, f[0]}, b{"B", 1.0e15L + 8.1e9L, 150, INFINITY, 0, f[1]},
      c{"C", 1.0e15L - 4.3e9L, -80, INFINITY, 0, f[2]};
  synth::Cluster cl({a, b, c}, 7);
  // At different frequencies, each node's meta.json gives its nominal one (the
  // true rates are off it by the skews, within rho).
  if (f[0] != f[1] || f[1] != f[2])
    for (int i = 0; i < 3; ++i) cl.extra_meta[i] = {{"tsc_hz", double(f[i] * 1e9L)}};
  const long double span = 6e9L;
  // Start rounds and a stream every 500 ms up to 2 s; events until 5.5 s.
  for (auto [i, j] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}) {
    cl.rounds(i, j, "start", 1e6L, 20, 500000);
    for (long double t = 40e6L; t < 2e9L; t += 500e6L) cl.rounds(i, j, "stream", t, 1, 0);
  }
  cl.pipeline(2000, 50e6L, 2.7e6L);
  const std::string run = tmp / "run";
  std::vector<std::string> dirs;
  for (size_t i = 0; i < cl.size(); ++i) {
    dirs.push_back(run + "/" + cl.clock(int(i)).name);
    cl.write(int(i), dirs.back(), span);
  }

  o.pairs = {{"A.out", "C.in"}, {"B.out", "C.in"}};
  o.reference = "A";
  RunView view(run, o);
  view.poll();
  ASSERT_TRUE(view.complete());
  s = view.snapshot();
  ASSERT_TRUE(s["problems"].empty()) << s.dump();

  TranslateOptions t;
  t.dirs = dirs;
  t.reference = "A";
  t.out = tmp / "tr";
  t.clock_model = ClockModel::Piecewise;
  t.inputs = Inputs::Rounds;
  t.accept_suspect_sync = true;  // no stop rounds: nothing to check rates against
  translate(t);
  for (size_t k = 0; k < o.pairs.size(); ++k) {
    const auto& [from, to] = o.pairs[k];
    const nlohmann::json& p = s["pairs"][k];
    ASSERT_EQ(p["count"].get<size_t>(), 2000u) << p.dump();
    std::vector<long double> truth;
    for (uint64_t tuple = 0; tuple < 2000; ++tuple) truth.push_back(cl.truth_ticks(from, to, tuple, 0));
    std::sort(truth.begin(), truth.end());
    LatencyResult res = latency(tmp / "tr", from, to);
    ASSERT_EQ(res.rows.size(), 2000u);
    std::vector<int64_t> est, lo, hi;
    for (const LatencyRow& r : res.rows) est.push_back(r.ticks), lo.push_back(r.ticks_lo), hi.push_back(r.ticks_hi);
    std::sort(est.begin(), est.end()), std::sort(lo.begin(), lo.end()), std::sort(hi.begin(), hi.end());
    for (size_t q = 0; q < 4; ++q) {
      size_t i = nearest_rank_index(2000, kQ[q]);
      const nlohmann::json& v = p[kQuantiles[q]];
      EXPECT_LE(v["ticks_lo"].get<int64_t>(), truth[i]) << from << "->" << to << " " << kQuantiles[q];
      EXPECT_GE(v["ticks_hi"].get<int64_t>(), truth[i]) << from << "->" << to << " " << kQuantiles[q];
      EXPECT_EQ(v["ticks"].get<int64_t>(), est[i]) << from << "->" << to << " " << kQuantiles[q];
      EXPECT_EQ(v["ticks_lo"].get<int64_t>(), lo[i]) << from << "->" << to << " " << kQuantiles[q];
      EXPECT_EQ(v["ticks_hi"].get<int64_t>(), hi[i]) << from << "->" << to << " " << kQuantiles[q];
    }
  }
  EXPECT_EQ(s["pairs"][0]["scenarios"].value("reference-remote", 0), 2000);
  EXPECT_EQ(s["pairs"][1]["scenarios"].value("remote-remote-direct", 0), 2000);
}

TEST(RunView, BoundsPastTheLastRoundHoldTheTruthAndEqualTranslate) {
  testutil::TempDir tmp;
  nlohmann::json s;
  RunViewOptions o;
  view_equals_translate(tmp, {2.5L, 2.5L, 2.5L}, s, o);
  if (HasFatalFailure()) return;
  const std::string run = tmp / "run";

  // `cptrace top RUN` finds the run, shows the same numbers, and ends (complete).
  TopOptions top;
  top.dir = run;
  top.pairs = {{"A.out", "C.in"}, {"B.out", "C.in"}};
  top.reference = "A";
  top.json = true;
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_top(top), 0);
  nlohmann::json j = nlohmann::json::parse(testing::internal::GetCapturedStdout());
  EXPECT_EQ(j["state"], "complete");
  EXPECT_EQ(j["pairs"], s["pairs"]);
  top.json = false;
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_top(top), 0);
  std::string text = testing::internal::GetCapturedStdout();
  EXPECT_NE(text.find("A.out -> C.in  2000 tuples (on A's clock"), std::string::npos) << text;
  EXPECT_NE(text.find("p99"), std::string::npos) << text;
}

// Nodes whose TSCs tick at different nominal frequencies (2.5, 2.1 and 2.8 ticks
// per ns): the rate interval is around their ratio, every bound holds the truth.
TEST(RunView, NodesAtDifferentFrequenciesHoldTheTruth) {
  testutil::TempDir tmp;
  nlohmann::json s;
  RunViewOptions o;
  view_equals_translate(tmp, {2.5L, 2.1L, 2.8L}, s, o);
}

// Node directories that appear later join; a reference not there yet is said.
TEST(RunView, NodesJoinAsTheirDirectoriesAppear) {
  testutil::TempDir tmp;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150};
  synth::Cluster cl({a, b}, 3);
  cl.rounds(0, 1, "start", 1e6L, 20, 500000);
  for (uint64_t k = 0; k < 10; ++k) {
    cl.event(0, "A.out", k, 50e6L + k * 1e6L);
    cl.event(1, "B.in", k, 50e6L + k * 1e6L + cl.delay(0, 1));
  }
  const std::string run = tmp / "run";
  std::filesystem::create_directories(run);
  RunViewOptions o;
  o.pairs = {{"A.out", "B.in"}};
  o.reference = "A";
  RunView view(run, o);
  cl.write(1, run + "/B", 1e9L);
  view.poll();
  EXPECT_EQ(view.nodes(), 1u);
  nlohmann::json s = view.snapshot();
  ASSERT_EQ(s["problems"].size(), 1u) << s.dump();
  EXPECT_NE(s["problems"][0].get<std::string>().find("--reference A"), std::string::npos);
  cl.write(0, run + "/A", 1e9L);
  view.poll();
  EXPECT_EQ(view.nodes(), 2u);
  s = view.snapshot();
  EXPECT_EQ(s["pairs"][0]["count"].get<size_t>(), 10u) << s.dump();
  EXPECT_TRUE(view.complete());
}

// `top RUN` can start polling when RUN holds only a recorder's directory with
// no frame yet (no cluster.json either): no node, nothing bounded, no crash.
TEST(RunView, NoNodeYetIsSaidAndNothingIsBounded) {
  testutil::TempDir tmp;
  const std::string run = tmp / "run";
  std::filesystem::create_directories(run + "/A");
  std::ofstream(run + "/A/events.cpt");
  EXPECT_FALSE(holds_run(run)) << "`top` waits on: no frame tells a recording yet";
  RunViewOptions o;
  o.pairs = {{"A.out", "B.in"}};
  RunView view(run, o);
  view.poll();
  EXPECT_EQ(view.nodes(), 0u);
  EXPECT_FALSE(view.complete());
  nlohmann::json s = view.snapshot();
  EXPECT_TRUE(s["pairs"].empty()) << s.dump();
  ASSERT_EQ(s["problems"].size(), 1u) << s.dump();
  EXPECT_EQ(s["problems"][0], "no node in the run yet");
}

// Nodes A and B (B's clock 8.1 s ahead, at another rate) and MinRTT rounds each way at the start.
synth::Cluster two_nodes_with_rounds() {
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150};
  synth::Cluster cl({a, b}, 3);
  cl.rounds(0, 1, "start", 1e6L, 20, 500000);
  cl.rounds(1, 0, "start", 1e6L, 20, 500000);
  return cl;
}

// A copy of a node's trace beside it (a backup, A and A-plain): two traces of
// one node, which the view says, as translate refuses them.
TEST(RunView, TwoTracesOfOneNodeAreSaid) {
  testutil::TempDir tmp;
  synth::Cluster cl = two_nodes_with_rounds();
  const std::string run = tmp / "run";
  cl.write(0, run + "/A", 1e9L);
  cl.write(1, run + "/B", 1e9L);
  std::filesystem::copy(run + "/A", run + "/A-copy", std::filesystem::copy_options::recursive);
  RunView view(run, RunViewOptions{});
  view.poll();
  const nlohmann::json s = view.snapshot();
  ASSERT_EQ(s["nodes"].size(), 3u) << s.dump();
  size_t said = 0;
  for (const auto& p : s["problems"])
    said += p.get<std::string>().rfind("node A has 2 traces (A, A-copy): overlapping recordings", 0) == 0;
  EXPECT_EQ(said, 1u) << s["problems"].dump();
}

// A finished cluster run also holds RUN/translated (a translated trace) and
// other directories: none of them is a node. Without RUN/cluster.json the
// recordings are told by their meta.json, or before it by their first frame
// (the clock stream); with it, its node list is the run's, its first node the
// reference, and the run is complete only once every listed node is.
TEST(RunView, TranslatedAndOtherDirectoriesAreNoNodes) {
  testutil::TempDir tmp;
  synth::Cluster cl = two_nodes_with_rounds();
  for (uint64_t k = 0; k < 10; ++k) {
    cl.event(0, "A.out", k, 50e6L + k * 1e6L);
    cl.event(1, "B.in", k, 50e6L + k * 1e6L + cl.delay(0, 1));
  }
  const std::string run = tmp / "run";
  cl.write(0, run + "/A", 1e9L);
  cl.write(1, run + "/B", 1e9L);
  TranslateOptions t;
  t.dirs = {run + "/A", run + "/B"};
  t.reference = "A";
  t.out = run + "/translated";
  translate(t);
  std::filesystem::create_directories(run + "/empty");  // a recorder that has not written its header yet
  std::ofstream(run + "/empty/events.cpt");
  std::filesystem::remove(run + "/B/meta.json");  // as streamed before the recorder's meta.json arrives
  std::filesystem::create_directories(run + "/nometa");  // a translated trace's frames, its meta.json not there
  std::filesystem::copy_file(run + "/translated/events.cpt", run + "/nometa/events.cpt");
  EXPECT_TRUE(holds_run(run));
  // A directory holding only translated traces is no run `top` could follow.
  std::filesystem::create_directories(tmp / "only");
  std::filesystem::copy(run + "/translated", (tmp / "only") + "/translated");
  std::filesystem::copy(run + "/nometa", (tmp / "only") + "/nometa");
  EXPECT_FALSE(holds_run(tmp / "only"));

  RunViewOptions o;
  o.pairs = {{"A.out", "B.in"}};
  {
    RunView view(run, o);
    view.poll();
    EXPECT_EQ(view.nodes(), 2u);
    nlohmann::json s = view.snapshot();
    ASSERT_EQ(s["nodes"].size(), 2u) << s.dump();
    EXPECT_EQ(s["nodes"][0]["node"], "A");
    EXPECT_EQ(s["nodes"][1]["node"], "B");
    EXPECT_EQ(s["pairs"][0]["reference"], "A");
    EXPECT_EQ(s["pairs"][0]["count"].get<size_t>(), 10u) << s.dump();
  }
  // The manifest: B first (its reference), and C listed but not there yet:
  // its directory made, its events.cpt not yet (the controller's order).
  std::ofstream(run + "/cluster.json") << R"({"run_id": "x", "nodes": [{"name": "B"}, {"name": "A"}, {"name": "C"}]})";
  std::filesystem::create_directories(run + "/C");
  cl.write(1, run + "/B", 1e9L);  // B's meta.json came (complete)
  RunView view(run, o);
  view.poll();
  EXPECT_EQ(view.nodes(), 2u);
  EXPECT_EQ(view.incomplete(), std::vector<std::string>{"C"});
  EXPECT_FALSE(view.complete()) << "C is listed and missing";
  nlohmann::json s = view.snapshot();
  EXPECT_EQ(s["nodes"][0]["node"], "B");
  EXPECT_EQ(s["pairs"][0]["reference"], "B");
  EXPECT_EQ(s["pairs"][0]["count"].get<size_t>(), 10u) << s.dump();
  std::ofstream(run + "/cluster.json") << R"({"run_id": "x", "nodes": [{"name": "B"}, {"name": "A"}]})";
  view.poll();
  EXPECT_TRUE(view.complete());
}

// The end of each frame of a trace file, in order.
std::vector<uint64_t> frame_ends(const std::string& path) {
  std::string f = testutil::read_file(path);
  std::vector<uint64_t> out;
  for (size_t at = kFileHeaderSize; at + sizeof(FrameHeader) <= f.size();) {
    FrameHeader h;
    memcpy(&h, f.data() + at, sizeof h);
    at += sizeof h + h.payload_len;
    out.push_back(at);
  }
  return out;
}

// A run growing step by step (rounds every 0.5 s while recording, on every
// pair): after each step the view's refresh, which bounds again only the tuples
// whose relations changed where they query them, equals a full recomputation (a
// new view of the same bytes) value for value, for a reference-remote, a
// remote-remote and a same-node pair; and it bounded far fewer tuples.
TEST(RunView, NewRoundsRecomputeOnlyChangedBoundsIdenticalToFull) {
  testutil::TempDir tmp;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 11);
  const long double span = 6e9L;
  const std::vector<std::pair<int, int>> all = {{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}};
  for (auto [i, j] : all) cl.rounds(i, j, "start", 1e6L, 20, 500000);
  for (long double t = 40e6L; t < span; t += 500e6L)
    for (auto [i, j] : all) cl.rounds(i, j, "stream", t, 1, 0);
  cl.pipeline(2000, 50e6L, 2.7e6L);
  const std::string src = tmp / "src", run = tmp / "run";
  const char* names[] = {"A", "B", "C"};
  std::vector<std::vector<size_t>> steps;
  std::vector<std::vector<uint64_t>> ends;
  for (int i = 0; i < 3; ++i) {
    steps.push_back(cl.write_steps(i, src + "/" + names[i], span, 250e6L));
    ends.push_back(frame_ends(src + "/" + names[i] + "/events.cpt"));
    std::filesystem::create_directories(run + "/" + names[i]);
  }
  RunViewOptions o;
  o.pairs = {{"A.out", "C.in"}, {"B.out", "C.in"}, {"B.in", "B.out"}};
  o.reference = "A";
  RunView view(run, o);
  std::vector<uint64_t> copied(3, 0);
  uint64_t bounded = 0, bounded_full = 0, rebounded_old = 0;
  size_t matched_before = 0;
  for (size_t k = 0; k < steps[0].size(); ++k) {
    for (int i = 0; i < 3; ++i) {  // the bytes of step k, appended as a recorder appends them
      std::string f = testutil::read_file(src + "/" + names[i] + "/events.cpt");
      uint64_t end = ends[i][steps[i][k] - 1];
      std::ofstream(run + "/" + names[i] + "/events.cpt", std::ios::app | std::ios::binary)
          << f.substr(copied[i], end - copied[i]);
      copied[i] = end;
    }
    view.poll();
    nlohmann::json s = view.snapshot();
    RunView fresh(run, o);
    fresh.poll();
    nlohmann::json f = fresh.snapshot();
    ASSERT_EQ(s["pairs"], f["pairs"]) << "step " << k;
    size_t matched = 0;
    for (const auto& p : s["pairs"]) matched += p["matched"].get<size_t>();
    bounded += view.last_bounded(), bounded_full += fresh.last_bounded();
    EXPECT_GE(view.last_bounded(), matched - matched_before) << "step " << k << ": every new tuple is bounded";
    rebounded_old += view.last_bounded() - (matched - matched_before);
    matched_before = matched;
  }
  EXPECT_EQ(matched_before, 6000u);
  EXPECT_GT(rebounded_old, 0u) << "no refresh bounded an earlier tuple again: new rounds changed nothing?";
  EXPECT_LT(bounded * 4, bounded_full) << "incremental refreshes bounded " << bounded << " tuples, full ones "
                                       << bounded_full;
  printf("  [run view] %zu refreshes: %llu tuples bounded (%llu again after new rounds), full recomputation %llu\n",
         steps[0].size(), (unsigned long long)bounded, (unsigned long long)rebounded_old,
         (unsigned long long)bounded_full);
}

}  // namespace
}  // namespace cptrace
