// `cptrace cluster record` losing parts of the run: 5 nodes in a chain (N1 ->
// ... -> N5, the pipeline workload over TCP), N3 reached through real OpenSSH.
// Mid-run, N3's ssh client is SIGKILLed (its transport breaks, its recorder goes
// on) and N4's recorder is SIGKILLed; Ctrl-C once N3's stream is taken up
// again. Asserts: the other nodes record to the stop and their copies are
// byte-identical to the nodes' own; N3's stream is taken up again mid-run from
// where it broke (its agent, without a controller for longer than
// --controller-timeout, did not stop the recorder; the stop came through the
// follow agent and N3's recorder counts as stopped, not failed),
// its copy is byte-identical and the summary says so (resumed, no gap); N4's
// copy is byte-identical to what its node holds, the run is still translated
// with N4's partial trace, and the gap is named (node, signal, when it died and
// where its events end on the reference's clock) on stderr, in RUN/cluster.json
// and RUN/report.html, and again by `cluster gather`; the death's reported
// interval meets the true one (kill .. reaped); the per-hop summary and the
// report come out and the exit status is 1; every bound reported for a tuple
// (end to end, and the hops through N4 before its loss) contains the truth (one
// physical TSC: the nodes' correlation streams invert it).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "cptrace.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "translate/translated_frame.h"
#include "truth_util.h"

namespace cptrace {
namespace {

namespace fs = std::filesystem;
using namespace clustertest;
using testbed::skip_reason;

constexpr int kNodes = 5, kSsh = 3, kLost = 4;
constexpr uint64_t kTuples = 100000;  // at 100/s: the run ends by Ctrl-C

std::vector<std::string> stage(int k) {
  std::string wl = (testutil::build_dir() / "tests" / "pipeline").string(), name = "N" + std::to_string(k);
  std::vector<std::string> c = {wl, "--stage", name};
  std::vector<std::string> role;
  if (k == 1)
    role = {"--role",
            "A",
            "--connect",
            ip(2) + ":9000",
            "--tuples",
            std::to_string(kTuples),
            "--rate",
            "100",
            "--connect-timeout",
            "40"};
  else if (k == kNodes)
    role = {"--role", "C", "--listen", ip(k) + ":9000"};
  else
    role = {"--role", "B", "--listen", ip(k) + ":9000", "--connect", ip(k + 1) + ":9000", "--connect-timeout", "40"};
  c.insert(c.end(), role.begin(), role.end());
  return c;
}

// The first process whose command line holds every needle, with its parent's pid.
std::pair<pid_t, pid_t> find_process(const std::vector<std::string>& needles) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string c = testutil::read_file(e.path() / "cmdline");
    std::replace(c.begin(), c.end(), '\0', ' ');
    bool all = !c.empty();
    for (const auto& n : needles) all = all && c.find(n) != std::string::npos;
    if (!all) continue;
    std::string stat = testutil::read_file(e.path() / "stat");
    return {pid_t(atoi(e.path().filename().c_str())), pid_t(atoi(stat.substr(stat.rfind(')') + 4).c_str()))};
  }
  return {-1, -1};
}

TEST(Cluster, NodeLostAndTransportBrokenMidRunRestCompleteGapReported) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  ASSERT_TRUE(testbed::is_file("/usr/sbin/sshd")) << "openssh-server missing: run tools/install-deps.sh";
  testbed::Testbed tb("clf", kNodes, "--delay 100");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  std::string keys = make_ssh_keys(tmp);
  ASSERT_EQ(keys, "");
  Sshd sshd(tmp, tb.ns(kSsh), kSsh);
  ASSERT_TRUE(wait_ssh_up(tmp, tb.ns(1), kSsh)) << testutil::read_file(tmp / "ssh/sshd3.err");

  const char* sims[] = {"1500000000,40", "-2700000000,-150", "900000000,200", "300000000,-60", "-800000000,90"};
  nlohmann::json nodes = nlohmann::json::array();
  for (int k = 1; k <= kNodes; ++k) {
    nlohmann::json n = {{"name", "N" + std::to_string(k)},
                        {"minrtt", ip(k)},
                        {"command", stage(k)},
                        {"record", {"--simulate-clock", sims[k - 1]}}};
    n["transport"] =
        k == kSsh ? nlohmann::json(ssh_transport(tmp, tb.ns(1), k)) : nlohmann::json({"ip", "netns", "exec", tb.ns(k)});
    nodes.push_back(n);
  }
  nlohmann::json file = {{"cptrace", testutil::cptrace_bin()}, {"dir", tmp / "local"}, {"nodes", nodes}};
  std::ofstream(tmp / "nodes.json") << file.dump(2);
  std::string path = "N1.out";
  for (int k = 2; k < kNodes; ++k) path += ",N" + std::to_string(k) + ".in,N" + std::to_string(k) + ".out";
  path += ",N" + std::to_string(kNodes) + ".in";
  testutil::Proc ctl(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                         " --sync-rounds 20 --sync-wait 4 --controller-timeout 5 --path " + path,
                     tmp / "ctl.out", tmp / "ctl.err");

  // Mid-run: N3's ssh client, then N4's recorder, each once its events stream in.
  auto streaming = [&](const char* n) {
    std::error_code ec;
    return fs::file_size(tmp / (std::string("run/") + n + "/events.cpt"), ec) > 4096 && !ec;
  };
  ASSERT_TRUE(wait_until([&] { return streaming("N3") && streaming("N4"); }, 60))
      << testutil::read_file(tmp / "ctl.err");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto [ssh, ssh_parent] = find_process({"ssh ", tmp.path.string(), "root@" + ip(kSsh), "cluster agent"});
  ASSERT_GT(ssh, 0) << "N3's ssh client";
  ASSERT_EQ(ssh_parent, ctl.pid) << "the controller's own child: the transport";
  kill(ssh, SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto [rec, rec_parent] = find_process({" record ", "/N4/trace", tmp.path.string()});
  ASSERT_GT(rec, 0) << "N4's recorder";
  // The truth of its death: after the kill, before its agent has reaped it.
  const int64_t killed_at = testbed::mono_ns();
  kill(rec, SIGKILL);
  ASSERT_TRUE(wait_until([&] { return kill(rec, 0) != 0; }, 30));
  const int64_t gone_at = testbed::mono_ns();
  // The others record on; N3's stream is taken up again; then Ctrl-C (which the
  // follow agent passes to N3's recorder, whose own agent has no controller).
  // The others go on for 3 s after both are known to the controller: the loss is
  // said as it is seen, not only in the summary.
  ASSERT_TRUE(ctl.wait_for("node N3: stream resumed at", 60, true)) << testutil::read_file(tmp / "ctl.err");
  ASSERT_TRUE(ctl.wait_for("node N4: recorder killed by signal 9 (seen at +", 60, true))
      << testutil::read_file(tmp / "ctl.err");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  kill(ctl.pid, SIGINT);

  int st = ctl.wait(90);
  std::string out = testutil::read_file(tmp / "ctl.out"), err = testutil::read_file(tmp / "ctl.err");
  printf("%s%s", out.c_str(), err.c_str());
  EXPECT_EQ(st, 1) << "a node is incomplete: exit 1, everything else produced";
  EXPECT_NE(err.find("stopping every node (Interrupt)"), std::string::npos) << err;
  EXPECT_NE(out.find("per-hop latency"), std::string::npos) << out;
  EXPECT_NE(out.find("end to end"), std::string::npos) << out;
  ASSERT_TRUE(fs::exists(tmp / "run/translated/events.cpt")) << err;
  ASSERT_TRUE(fs::exists(tmp / "run/report.html")) << err;

  // Every node's copy is byte for byte what the node holds.
  std::string local_run;
  for (const auto& e : fs::directory_iterator(tmp / "local")) local_run = e.path();
  for (int k = 1; k <= kNodes; ++k) {
    std::string name = "N" + std::to_string(k);
    for (const char* f : {"events.cpt", "meta.json"}) {
      std::string a = testutil::read_file(tmp / ("run/" + name + "/" + f)),
                  b = testutil::read_file(local_run + "/" + name + "/trace/" + f);
      EXPECT_FALSE(a.empty()) << name << "/" << f;
      EXPECT_TRUE(a == b) << name << "/" << f << ": controller copy " << a.size() << " bytes, node's " << b.size();
    }
    TraceReader r(tmp / ("run/" + name));
    if (k == kLost) {
      EXPECT_TRUE(!r.error() || r.truncated_tail()) << "N4: up to its last complete frame: " << r.error()->what();
      EXPECT_FALSE(r.meta().value("complete", true)) << "N4's meta.json as written at its start";
      continue;
    }
    EXPECT_FALSE(r.error()) << name;
    EXPECT_TRUE(r.meta().value("complete", false)) << name << ": recorded to the normal end";
    auto status = nlohmann::json::parse(testutil::read_file(local_run + "/" + name + "/status.json"));
    EXPECT_FALSE(status.contains("signal")) << name << " " << status.dump();
    // N3's agent lost its controller (not for 5 s: the stream was taken up again),
    // and still knows the stop came from it.
    EXPECT_EQ(status.value("stopped_by", ""), "controller") << name << " " << status.dump();
  }

  // The summary and the manifest: N3 broke and was resumed, N4's gap by name and time.
  EXPECT_NE(err.find("node N3: its stream broke at +"), std::string::npos) << err;
  EXPECT_NE(err.find("node N3: stream resumed at +"), std::string::npos) << "taken up again mid-run: " << err;
  EXPECT_NE(err.find("resumed from there at +"), std::string::npos) << err;
  EXPECT_NE(err.find("complete, no gap"), std::string::npos) << err;
  const std::string gap = "node N4: recorder killed by signal 9 between +";
  EXPECT_NE(err.find(gap), std::string::npos) << err;
  EXPECT_NE(err.find("events on N4 after +"), std::string::npos) << err;
  auto m = nlohmann::json::parse(testutil::read_file(tmp / "run/cluster.json"));
  std::map<std::string, nlohmann::json> by;
  for (const auto& n : m["nodes"]) by[n.value("name", "")] = n;
  for (const char* n : {"N1", "N2", "N3", "N5"}) EXPECT_EQ(by[n].value("state", ""), "complete") << by[n].dump();
  EXPECT_TRUE(by["N3"]["stream"].value("resumed", false)) << by["N3"].dump();
  EXPECT_FALSE(by["N3"]["stream"].value("gap", true)) << by["N3"].dump();
  EXPECT_GE(by["N3"]["stream"].value("resumed_at_s", -1.0), by["N3"]["stream"].value("broke_at_s", 0.0));
  EXPECT_EQ(by["N4"].value("state", ""), "recorder_killed") << by["N4"].dump();
  const nlohmann::json& lost = by["N4"]["gap"];
  EXPECT_EQ(lost.value("signal", 0), 9) << lost.dump();
  double seen = lost.value("seen_at_s", -1.0), run_s = lost.value("run_s", -1.0);
  EXPECT_GT(seen, 0) << lost.dump();
  EXPECT_LT(seen, run_s) << lost.dump();
  EXPECT_GT(run_s, seen + 3) << "the others went on to the stop: " << lost.dump();
  std::string html = testutil::read_file(tmp / "run/report.html");
  EXPECT_NE(html.find(gap), std::string::npos) << "the report names the gap";

  // Where N4's events end on the reference's clock: the reported instant covers
  // every N4 event kept, and the others recorded well past it.
  TraceReader t(tmp / "run/translated");
  const auto& tnodes = t.meta()["translated"]["nodes"];
  std::map<uint16_t, std::string> node_name;
  for (size_t i = 0; i < tnodes.size(); ++i) node_name[uint16_t(i)] = tnodes[i].value("node", "");
  TraceReader ref(tmp / "run/N1");
  const double hz = ref.clock_map().tsc_hz();
  const int64_t ref0 = ref.meta()["start"].value("tsc", int64_t(0));
  std::map<std::string, int64_t> last_lo;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> local;
  std::vector<TranslatedEvent> evs;
  t.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      local[{e.channel, e.tuple}] = e.local_ts;
      int64_t& l = last_lo[node_name[e.node]];
      l = std::max(l, e.ref_lo);
    }
  });
  double ends = lost.value("trace_ends_s", -1.0), ends_err = lost.value("trace_ends_err_s", -1.0);
  EXPECT_GE(ends_err, 0) << lost.dump();
  EXPECT_GT(ends, 0) << lost.dump();
  EXPECT_LT(ends, run_s) << lost.dump();
  EXPECT_LE((last_lo["N4"] - ref0) / hz, ends + ends_err + 1e-6) << "every N4 event kept is before the gap";
  EXPECT_GT((last_lo["N5"] - ref0) / hz, ends + 2) << "N5 went on recording after N4 was lost";
  // When it died, on the same clock: the reported interval meets [kill, reaped]
  // (one physical TSC: N1's clock stream puts those instants on its TSC).
  ASSERT_TRUE(lost.contains("killed_s")) << lost.dump();
  double k_lo = lost["killed_s"][0], k_hi = lost["killed_s"][1];
  std::vector<ClockPoint> c1 = TraceReader(tmp / "run/N1").clock_map().points();
  double t_kill = double((truth::interp(c1, (long double)killed_at, false) - ref0) / hz),
         t_gone = double((truth::interp(c1, (long double)gone_at, false) - ref0) / hz);
  EXPECT_LE(k_lo, t_gone) << lost.dump();
  EXPECT_GE(k_hi, t_kill) << lost.dump();
  EXPECT_LE(ends - ends_err, k_hi) << "its events end before its death: " << lost.dump();
  printf(
      "  [cluster faults] N4 killed at +%.3f s (reaped by +%.3f s), reported between +%.3f and +%.3f s; its "
      "events end at +%.3f s\n",
      t_kill, t_gone, k_lo, k_hi, ends);
  EXPECT_GT((last_lo["N3"] - ref0) / hz, ends + 2) << "N3 went on recording after its transport broke";

  // Every bound contains the truth: end to end, and the hops through N4 (tuples
  // that passed it before its loss, N4's clock relation extrapolated).
  std::map<std::string, std::vector<ClockPoint>> clock;
  for (int k = 1; k <= kNodes; ++k) {
    std::string n = "N" + std::to_string(k);
    clock[n] = TraceReader(tmp / ("run/" + n)).clock_map().points();
  }
  std::map<std::string, size_t> rows;
  for (auto [c1, c2] : std::vector<std::pair<std::string, std::string>>{
           {"N1.out", "N5.in"}, {"N1.out", "N4.in"}, {"N3.out", "N4.in"}, {"N4.out", "N5.in"}}) {
    LatencyResult res = latency(tmp / "run/translated", c1, c2);
    rows[c1 + "," + c2] = res.rows.size();
    EXPECT_GT(res.rows.size(), 100u) << c1 << " -> " << c2;
    uint64_t ch1 = cp_channel_id(c1.c_str()), ch2 = cp_channel_id(c2.c_str());
    size_t contained = 0;
    int64_t widest = 0;
    for (const LatencyRow& row : res.rows) {
      uint64_t a = local.at({ch1, row.tuple}), b = local.at({ch2, row.tuple});
      long double ns = truth::interp(clock[c2.substr(0, 2)], (long double)b, true) -
                       truth::interp(clock[c1.substr(0, 2)], (long double)a, true);
      bool ok = ns >= row.ns_lo && ns <= row.ns_hi;
      contained += ok;
      widest = std::max(widest, row.ns_hi - row.ns_lo);
      EXPECT_TRUE(ok) << c1 << " -> " << c2 << " tuple " << row.tuple << " [" << row.ns_lo << ", " << row.ns_hi
                      << "] truth " << (double)ns;
    }
    printf("  [cluster faults] %s -> %s: %zu/%zu bounds contain the truth, widest %lld ns\n", c1.c_str(), c2.c_str(),
           contained, res.rows.size(), (long long)widest);
  }

  EXPECT_GT(rows["N1.out,N5.in"], rows["N1.out,N4.in"] + 200)
      << "tuples went on reaching N5 after N4's loss (its workload runs on without its recorder)";

  // `cluster gather` later: nothing to fetch, the same gap named from the manifest.
  auto g = testutil::run(testutil::cptrace_bin() + " cluster gather " + (tmp / "run"), tmp);
  EXPECT_EQ(g.status, 1) << g.out << g.err;
  EXPECT_NE(g.err.find(gap), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("events on N4 after +"), std::string::npos) << g.err;
}

}  // namespace
}  // namespace cptrace
