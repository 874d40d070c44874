// `cptrace cluster record` at 64 nodes on the namespace testbed: 8 chains of 8
// nodes, each chain one pipeline (first node sends, six pass on, the last
// receives), so every path crosses 8 nodes; 62 nodes reached through `ip netns
// exec`, two through real OpenSSH. Every recorder has its own simulated clock
// (offset and rate) and a small ring. Asserts: the run exits 0; every node's
// RUN/NODE/ is complete and byte for byte the node's own copy; the MinRTT
// topology is O(N) (at most 2N - 3 pairs, all of them connected into one
// tree-like graph holding every node, each pair with start and stop rounds); every
// tuple's duration on every hop and end to end on each chain is inside its bound, the truth from
// the nodes' clock streams (one physical TSC, as in test_cluster.cpp). And,
// small: a node whose workload ends seconds after the others' still gets its
// stop rounds (the responders are held until every node has stopped).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <set>

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
using clustertest::ip;
using testbed::skip_reason;
using testbed::Testbed;

constexpr int kChains = 8, kLen = 8, kNodes = kChains * kLen;
constexpr uint64_t kTuples = 60;  // per chain, at 100/s
constexpr size_t kRounds = 10;  // MinRTT rounds per pair, at start and at stop
const std::set<int> kSshNodes = {20, 45};

std::string name(int k) { return "N" + std::to_string(k); }
int first_of_chain(int c) { return c * kLen + 1; }
int last_of_chain(int c) { return c * kLen + kLen; }

// The stage of node k: the first of its chain sends, the last receives, the rest pass on.
std::vector<std::string> stage(int k) {
  std::string wl = (testutil::build_dir() / "tests" / "pipeline").string();
  int pos = (k - 1) % kLen;
  std::vector<std::string> cmd = {wl, "--stage", name(k)};
  std::vector<std::string> role;
  if (pos == 0)
    role = {"--role",
            "A",
            "--connect",
            ip(k + 1) + ":9000",
            "--tuples",
            std::to_string(kTuples),
            "--rate",
            "100",
            "--connect-timeout",
            "60"};
  else if (pos == kLen - 1)
    role = {"--role", "C", "--listen", ip(k) + ":9000"};
  else
    role = {"--role", "B", "--listen", ip(k) + ":9000", "--connect", ip(k + 1) + ":9000", "--connect-timeout", "60"};
  cmd.insert(cmd.end(), role.begin(), role.end());
  return cmd;
}

// Offsets of seconds either way and rates of -200..+200 ppm, different on every node.
std::string simulated_clock(int k) {
  long long offset = (long long)((k * 7919) % 5000 - 2500) * 1000000LL;
  int ppm = (k * 37) % 401 - 200;
  return std::to_string(offset) + "," + std::to_string(ppm);
}

// The number of nodes reachable from node 0 over the pairs.
size_t connected(const std::map<std::pair<std::string, std::string>, std::set<std::string>>& pairs) {
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> root = [&](const std::string& x) {
    auto it = parent.find(x);
    if (it == parent.end() || it->second == x) return x;
    return it->second = root(it->second);
  };
  for (const auto& [p, phases] : pairs) parent[root(p.first)] = root(p.second);
  size_t n = 0;
  for (int k = 1; k <= kNodes; ++k) n += root(name(k)) == root(name(1));
  return n;
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(Cluster64, SixtyFourNodesEightPathsEveryBoundHoldsTheTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  ASSERT_TRUE(testbed::is_file("/usr/sbin/sshd")) << "openssh-server missing: run tools/install-deps.sh";
  const auto t0 = std::chrono::steady_clock::now();
  Testbed tb("big", kNodes, "--delay 100 --jitter 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  const double testbed_s = since(t0);
  testutil::TempDir tmp;
  std::string keys = clustertest::make_ssh_keys(tmp);
  ASSERT_EQ(keys, "");
  std::vector<std::unique_ptr<clustertest::Sshd>> sshd;
  for (int k : kSshNodes) sshd.push_back(std::make_unique<clustertest::Sshd>(tmp, tb.ns(k), k));

  // 64 recorders on one machine: a 1 MiB ring per CPU and blocks of 1024 events
  // (the block pool is most of a recorder's memory) keep each near 20 MB.
  nlohmann::json nodes = nlohmann::json::array();
  for (int k = 1; k <= kNodes; ++k) {
    nlohmann::json n = {
        {"name", name(k)},
        {"minrtt", ip(k)},
        {"command", stage(k)},
        {"record", {"--simulate-clock", simulated_clock(k), "--ring-mb", "1", "--block-events", "1024"}}};
    n["transport"] = kSshNodes.count(k) ? nlohmann::json(clustertest::ssh_transport(tmp, tb.ns(1), k))
                                        : nlohmann::json({"ip", "netns", "exec", tb.ns(k)});
    nodes.push_back(n);
  }
  nlohmann::json file = {{"cptrace", testutil::cptrace_bin()}, {"dir", tmp / "local"}, {"nodes", nodes}};
  std::ofstream(tmp / "nodes.json") << file.dump(2);
  for (int k : kSshNodes)
    ASSERT_TRUE(clustertest::wait_ssh_up(tmp, tb.ns(1), k))
        << "sshd in node " << k << ": " << testutil::read_file(tmp / ("ssh/sshd" + std::to_string(k) + ".err"));

  const auto t1 = std::chrono::steady_clock::now();
  testutil::Proc ctl(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                         " --sync-rounds " + std::to_string(kRounds) + " --sync-wait 60",
                     tmp / "ctl.out", tmp / "ctl.err");
  int st = ctl.wait(170);
  const double run_s = since(t1);
  std::string out = testutil::read_file(tmp / "ctl.out"), err = testutil::read_file(tmp / "ctl.err");
  ASSERT_EQ(st, 0) << out << err;

  // Complete, byte-identical copies, and the rounds topology.
  std::string local_run;
  for (const auto& e : fs::directory_iterator(tmp / "local")) local_run = e.path().string();
  std::map<std::pair<std::string, std::string>, std::set<std::string>> pairs;  // -> phases with rounds
  size_t rounds = 0;
  uint64_t probes = 0, replies = 0;  // as every node's responder counted them
  std::vector<std::vector<ClockPoint>> clock(kNodes + 1);
  for (int k = 1; k <= kNodes; ++k) {
    for (const char* f : {"events.cpt", "meta.json"}) {
      std::string a = testutil::read_file(tmp / ("run/" + name(k) + "/" + f)),
                  b = testutil::read_file(local_run + "/" + name(k) + "/trace/" + f);
      EXPECT_FALSE(a.empty()) << name(k) << " " << f;
      EXPECT_TRUE(a == b) << name(k) << "/" << f << ": controller copy " << a.size() << " bytes, node's " << b.size();
    }
    TraceReader r(tmp / ("run/" + name(k)));
    ASSERT_FALSE(r.error()) << name(k);
    EXPECT_EQ(r.meta().value("complete", false), true) << name(k);
    for (const SyncRound& s : r.sync_rounds()) {
      pairs[std::minmax(name(k), s.peer)].insert(s.phase);
      rounds++;
    }
    clock[k] = r.clock_map().points();
    const nlohmann::json resp = r.meta().value("/minrtt/responder"_json_pointer, nlohmann::json::object());
    probes += resp.value("received", uint64_t(0));
    replies += resp.value("answered", uint64_t(0));
  }
  EXPECT_LE(pairs.size(), size_t(2 * kNodes - 3)) << "MinRTT pairs";
  EXPECT_EQ(rounds, 2 * kRounds * pairs.size()) << "every pair's rounds at start and at stop";
  EXPECT_EQ(connected(pairs), size_t(kNodes)) << "every node related to the reference";
  for (const auto& [pair, phases] : pairs)
    EXPECT_TRUE(phases.count("start") && phases.count("stop")) << pair.first << "-" << pair.second;

  // Every tuple's duration on every hop (k.out -> k+1.in: neighbours, whose own
  // rounds relate them directly) and end to end on every chain (through the
  // reference) contains the truth.
  const std::string tr = tmp / "run/translated";
  std::set<uint64_t> wanted;
  for (int k = 1; k <= kNodes; ++k)
    for (const char* end : {".in", ".out"}) wanted.insert(cp_channel_id((name(k) + end).c_str()));
  auto local = clustertest::local_stamps(tr, wanted);
  size_t contained = 0, total = 0, hop_contained = 0, hop_total = 0;
  int64_t widest = 0, narrowest = INT64_MAX;
  auto check = [&](int a, int b, size_t& in, size_t& all) {
    const std::string c1 = name(a) + ".out", c2 = name(b) + ".in";
    LatencyResult res = latency(tr, c1, c2);
    EXPECT_EQ(res.rows.size(), kTuples) << c1 << " -> " << c2;
    uint64_t ch1 = cp_channel_id(c1.c_str()), ch2 = cp_channel_id(c2.c_str());
    for (const LatencyRow& row : res.rows) {
      long double ta = truth::interp(clock[a], (long double)local.at({ch1, row.tuple}), true),
                  tb_ = truth::interp(clock[b], (long double)local.at({ch2, row.tuple}), true);
      long double ns = tb_ - ta;
      bool ok = ns >= row.ns_lo && ns <= row.ns_hi;
      in += ok, all++;
      widest = std::max(widest, row.ns_hi - row.ns_lo);
      narrowest = std::min(narrowest, row.ns_hi - row.ns_lo);
      EXPECT_TRUE(ok) << c1 << " -> " << c2 << " tuple " << row.tuple << " [" << row.ns_lo << ", " << row.ns_hi
                      << "] truth " << (double)ns;
    }
  };
  for (int c = 0; c < kChains; ++c) {
    check(first_of_chain(c), last_of_chain(c), contained, total);
    for (int k = first_of_chain(c); k < last_of_chain(c); ++k) check(k, k + 1, hop_contained, hop_total);
  }

  // The figures: the translate line is the controller's own.
  std::string translated_line;
  for (size_t at = out.find("translated "); at != std::string::npos && translated_line.empty();
       at = out.find("translated ", at + 1))
    if (at == 0 || out[at - 1] == '\n') translated_line = out.substr(at, out.find('\n', at) - at);
  printf("  [cluster64] testbed up %.1f s, cluster record %.1f s (recorders, rounds, streams, translate)\n", testbed_s,
         run_s);
  printf(
      "  [cluster64] %d nodes: %zu MinRTT pairs (2N-3 = %d; all pairs would be %d), %zu rounds; the responders "
      "received %llu probes, answered %llu\n",
      kNodes, pairs.size(), 2 * kNodes - 3, kNodes * (kNodes - 1) / 2, rounds, (unsigned long long)probes,
      (unsigned long long)replies);
  printf(
      "  [cluster64] %d chains of %d nodes: %zu/%zu end-to-end and %zu/%zu single-hop bounds contain the truth, "
      "width %lld..%lld ns\n",
      kChains, kLen, contained, total, hop_contained, hop_total, (long long)narrowest, (long long)widest);
  printf("  [cluster64] %s\n", translated_line.c_str());
  EXPECT_FALSE(translated_line.empty()) << out;
}

// Workloads that end far apart: the first two nodes stop at once, the third 6 s
// later (twice --stop-linger). Their responders are held until it has stopped
// too, so its stop rounds with the reference and its neighbour happen.
TEST(ClusterHold, LateNodeGetsItsStopRoundsFromNodesThatStoppedEarly) {
  REQUIRE_BPF();
  testutil::TempDir tmp;
  nlohmann::json nodes = nlohmann::json::array();
  for (int k = 1; k <= 3; ++k)
    nodes.push_back({{"name", name(k)},
                     {"transport", "env"},
                     {"minrtt", "127.0.0.1:" + std::to_string(17730 + k)},
                     {"command", k == 3 ? std::vector<std::string>{"sleep", "6"} : std::vector<std::string>{"true"}}});
  nlohmann::json f = {{"cptrace", testutil::cptrace_bin()}, {"dir", tmp / "local"}, {"nodes", nodes}};
  std::ofstream(tmp / "nodes.json") << f.dump();
  auto r = testutil::run(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                             " --sync-rounds 5 --sync-wait 4 --stop-linger 3",
                         tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::set<std::string>> phases;  // N3's peer -> phases with rounds
  TraceReader n3(tmp / "run/N3");
  for (const SyncRound& s : n3.sync_rounds()) phases[s.peer].insert(s.phase);
  for (const char* peer : {"N1", "N2"})
    EXPECT_TRUE(phases[peer].count("start") && phases[peer].count("stop")) << "N3 with " << peer << ": " << r.err;
}

}  // namespace
}  // namespace cptrace
