// `cptrace cluster record` end to end on the namespace testbed: 8 nodes, each
// running one stage of the pipeline workload (N1 -> N2 -> ... -> N8 over TCP),
// six reached through `ip netns exec`, two through real OpenSSH (an sshd started
// by the test inside their namespaces, a test host key and user key). Asserts:
// every node's RUN/NODE/ is byte for byte the node's own copy; the MinRTT
// topology is O(N) (at most 2 peers per node, at most 2N pairs); the run was
// translated and every end-to-end bound contains the truth (one physical TSC:
// the truth is the nodes' correlation streams, as in test_translate_e2e); the
// per-hop summary was printed; the key was on no process's command line and its
// file on each node was mode 0600. And the refusals: an unreachable node, a
// missing cptrace, a version mismatch, each named.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
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
using testbed::skip_reason;
using testbed::Testbed;
using namespace clustertest;

constexpr int kNodes = 8;
constexpr uint64_t kTuples = 400;
const std::set<int> kSshNodes = {4, 7};

// The stage of node k: N1 sends, N2..N7 pass on, N8 receives.
std::vector<std::string> stage(int k) {
  std::string wl = (testutil::build_dir() / "tests" / "pipeline").string(), name = "N" + std::to_string(k);
  std::string next = ip(k + 1) + ":9000";
  if (k == 1)
    return {wl,        "--role",   "A",
            "--stage", name,       "--connect",
            next,      "--tuples", std::to_string(kTuples),
            "--rate",  "100",      "--connect-timeout",
            "40"};
  if (k == kNodes) return {wl, "--role", "C", "--stage", name, "--listen", ip(k) + ":9000"};
  return {wl,  "--role", "B", "--stage", name, "--listen", ip(k) + ":9000", "--connect", next, "--connect-timeout",
          "40"};
}

// Every process's command line, NULs as spaces.
std::vector<std::string> all_cmdlines() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string s = testutil::read_file(e.path() / "cmdline");
    std::replace(s.begin(), s.end(), '\0', ' ');
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

struct KeySeen {
  int files = 0, agents = 0;
  std::vector<std::string> problems;
};

// While the run goes: each node's key file (mode 0600) and no command line holding the key.
KeySeen watch_keys(const std::string& local, double timeout_s) {
  KeySeen r;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end && r.files < kNodes) {
    r = {};
    std::vector<std::string> keys;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(local, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->path().filename() != "minrtt.key") continue;
      struct stat st;
      if (stat(it->path().c_str(), &st) != 0) continue;
      std::string key = testutil::read_file(it->path());
      while (!key.empty() && key.back() == '\n') key.pop_back();
      if (key.size() < 32) continue;  // being written
      keys.push_back(key);
      if ((st.st_mode & 0777) != 0600) r.problems.push_back(it->path().string() + " is not mode 0600");
    }
    r.files = int(keys.size());
    for (const std::string& c : all_cmdlines()) {
      for (const std::string& key : keys)
        if (c.find(key) != std::string::npos) r.problems.push_back("the key is on a command line: " + c);
      if (c.find("cluster agent") != std::string::npos && c.find("cptrace") != std::string::npos) r.agents++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return r;
}

TEST(Cluster, EightNodesNetnsAndSshStreamTranslateContainTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  ASSERT_TRUE(testbed::is_file("/usr/sbin/sshd")) << "openssh-server missing: run tools/install-deps.sh";
  Testbed tb("clu", kNodes, "--delay 100 --jitter 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  fs::create_directories(tmp / "ssh");
  mkdir("/run/sshd", 0755);  // sshd's privilege separation directory
  for (const char* k : {"host_key", "user_key"}) {
    auto r = testutil::run("ssh-keygen -q -t ed25519 -N '' -f " + (tmp / ("ssh/" + std::string(k))), tmp);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  fs::copy_file(tmp / "ssh/user_key.pub", tmp / "ssh/authorized_keys");
  std::vector<std::unique_ptr<Sshd>> sshd;
  for (int k : kSshNodes) sshd.push_back(std::make_unique<Sshd>(tmp, tb.ns(k), k));

  const char* sims[] = {"1500000000,40", "-2700000000,-150", "900000000,200",   "300000000,-60",
                        "-800000000,90", "2100000000,-20",   "-1200000000,130", "600000000,-110"};
  nlohmann::json nodes = nlohmann::json::array();
  for (int k = 1; k <= kNodes; ++k) {
    nlohmann::json n = {{"name", "N" + std::to_string(k)},
                        {"minrtt", ip(k)},
                        {"command", stage(k)},
                        {"record", {"--simulate-clock", sims[k - 1]}}};
    n["transport"] = kSshNodes.count(k) ? nlohmann::json(ssh_transport(tmp, tb.ns(1), k))
                                        : nlohmann::json({"ip", "netns", "exec", tb.ns(k)});
    nodes.push_back(n);
  }
  nlohmann::json file = {{"cptrace", testutil::cptrace_bin()}, {"dir", tmp / "local"}, {"nodes", nodes}};
  std::ofstream(tmp / "nodes.json") << file.dump(2);
  // sshd listens once its namespace's address is up; a version check over ssh shows it.
  for (int k : kSshNodes) {
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      std::string cmd;
      for (const auto& w : ssh_transport(tmp, tb.ns(1), k)) cmd += testbed::shq(w) + " ";
      up = testutil::run(cmd + "true", tmp).status == 0;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(up) << "sshd in node " << k << ": "
                    << testutil::read_file(tmp / ("ssh/sshd" + std::to_string(k) + ".err"));
  }

  std::string path;
  for (int k = 1; k <= kNodes; ++k)
    path += (k == 1 ? "" : ",") + std::string("N") + std::to_string(k) +
            (k == 1        ? ".out"
             : k == kNodes ? ".in"
                           : ".in,N" + std::to_string(k) + ".out");
  testutil::Proc ctl(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                         " --sync-rounds 30 --sync-wait 20 --path " + path,
                     tmp / "ctl.out", tmp / "ctl.err");
  KeySeen keys = watch_keys(tmp / "local", 60);
  int st = ctl.wait(150);
  std::string out = testutil::read_file(tmp / "ctl.out"), err = testutil::read_file(tmp / "ctl.err");
  ASSERT_EQ(st, 0) << out << err;
  printf("%s", out.c_str());
  EXPECT_EQ(keys.files, kNodes) << "key files seen while running";
  EXPECT_GE(keys.agents, kNodes) << "agents seen while running";
  for (const auto& p : keys.problems) ADD_FAILURE() << p;

  // Byte-identical copies, and the rounds topology.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> pairs;  // -> phases with rounds
  size_t rounds = 0;
  for (int k = 1; k <= kNodes; ++k) {
    std::string name = "N" + std::to_string(k), local;
    for (const auto& e : fs::directory_iterator(tmp / "local")) local = (e.path() / name / "trace").string();
    for (const char* f : {"events.cpt", "meta.json"}) {
      std::string a = testutil::read_file(tmp / ("run/" + name + "/" + f)), b = testutil::read_file(local + "/" + f);
      EXPECT_FALSE(a.empty()) << name << " " << f;
      EXPECT_TRUE(a == b) << name << "/" << f << ": controller copy " << a.size() << " bytes, node's " << b.size();
    }
    TraceReader r(tmp / ("run/" + name));
    ASSERT_FALSE(r.error()) << name;
    EXPECT_EQ(r.meta().value("complete", false), true) << name;
    const nlohmann::json& m = r.meta();
    size_t peers = m.contains("minrtt") && m["minrtt"].contains("peers") ? m["minrtt"]["peers"].size() : 0;
    EXPECT_LE(peers, 2u) << name;
    for (const SyncRound& s : r.sync_rounds()) {
      pairs[std::minmax(name, s.peer)].insert(s.phase);
      rounds++;
    }
  }
  EXPECT_LE(pairs.size(), size_t(2 * kNodes)) << "MinRTT pairs";
  EXPECT_GE(pairs.size(), size_t(kNodes - 1)) << "every node related to another";
  for (const auto& [pair, phases] : pairs)  // the later nodes still reached the earlier ones at the stop
    EXPECT_TRUE(phases.count("start") && phases.count("stop")) << pair.first << "-" << pair.second;
  printf("  [cluster] %d nodes: %zu MinRTT pairs (all pairs would be %d), %zu rounds\n", kNodes, pairs.size(),
         kNodes * (kNodes - 1) / 2, rounds);
  EXPECT_NE(out.find("per-hop latency"), std::string::npos);
  EXPECT_NE(out.find("end to end"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp / "run/report.html"));

  // Every end-to-end bound contains the truth (one physical TSC, the streams invert it).
  std::vector<std::vector<ClockPoint>> clock(kNodes + 1);
  for (int k = 1; k <= kNodes; ++k) clock[k] = TraceReader(tmp / ("run/N" + std::to_string(k))).clock_map().points();
  const std::string tr = tmp / "run/translated", c1 = "N1.out", c2 = "N" + std::to_string(kNodes) + ".in";
  LatencyResult res = latency(tr, c1, c2);
  EXPECT_EQ(res.rows.size(), kTuples);
  uint64_t ch1 = cp_channel_id(c1.c_str()), ch2 = cp_channel_id(c2.c_str());
  auto local = local_stamps(tr, {ch1, ch2});
  size_t contained = 0;
  int64_t widest = 0;
  for (const LatencyRow& row : res.rows) {
    uint64_t a = local.at({ch1, row.tuple}), b = local.at({ch2, row.tuple});
    long double ta = truth::interp(clock[1], (long double)a, true),
                tb_ = truth::interp(clock[kNodes], (long double)b, true);
    long double ns = tb_ - ta;
    bool ok = ns >= row.ns_lo && ns <= row.ns_hi;
    contained += ok;
    widest = std::max(widest, row.ns_hi - row.ns_lo);
    EXPECT_TRUE(ok) << "tuple " << row.tuple << " [" << row.ns_lo << ", " << row.ns_hi << "] truth " << (double)ns;
  }
  printf("  [cluster] %s -> %s: %zu/%zu bounds contain the truth, widest %lld ns\n", c1.c_str(), c2.c_str(), contained,
         res.rows.size(), (long long)widest);
}

// A 3-node run over `ip netns exec` (N1 -> N2 -> N3), the controller started in
// the background; `tuples` at 100/s.
struct SmallRun {
  Testbed tb;
  testutil::TempDir tmp;
  std::unique_ptr<testutil::Proc> ctl;
  SmallRun(const std::string& tag, uint64_t tuples, const std::string& opts) : tb(tag, 3, "--delay 100") {
    if (!tb.ok()) return;
    nlohmann::json nodes = nlohmann::json::array();
    const std::string wl = (testutil::build_dir() / "tests" / "pipeline").string();
    for (int k = 1; k <= 3; ++k) {
      std::vector<std::string> cmd = {wl, "--stage", "N" + std::to_string(k)};
      std::vector<std::string> role = k == 1   ? std::vector<std::string>{"--role",
                                                                          "A",
                                                                          "--connect",
                                                                          ip(2) + ":9000",
                                                                          "--tuples",
                                                                          std::to_string(tuples),
                                                                          "--rate",
                                                                          "100",
                                                                          "--connect-timeout",
                                                                          "40"}
                                      : k == 2 ? std::vector<std::string>{"--role",
                                                                          "B",
                                                                          "--listen",
                                                                          ip(2) + ":9000",
                                                                          "--connect",
                                                                          ip(3) + ":9000",
                                                                          "--connect-timeout",
                                                                          "40"}
                                               : std::vector<std::string>{"--role", "C", "--listen", ip(3) + ":9000"};
      cmd.insert(cmd.end(), role.begin(), role.end());
      nodes.push_back({{"name", "N" + std::to_string(k)},
                       {"transport", {"ip", "netns", "exec", tb.ns(k)}},
                       {"minrtt", ip(k)},
                       {"command", cmd}});
    }
    nlohmann::json file = {{"cptrace", testutil::cptrace_bin()}, {"dir", tmp / "local"}, {"nodes", nodes}};
    std::ofstream(tmp / "nodes.json") << file.dump(2);
    ctl = std::make_unique<testutil::Proc>(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") +
                                               " -o " + (tmp / "run") + " --sync-rounds 20 --sync-wait 10 " + opts,
                                           tmp / "ctl.out", tmp / "ctl.err");
  }
  // The node's own trace directory.
  std::string node_trace(const std::string& name) const {
    for (const auto& e : fs::directory_iterator(tmp / "local")) return (e.path() / name / "trace").string();
    return "";
  }
  // Every node's copy has more than its file header: a stop sent before a slow
  // node (on a loaded host) wrote its header would find nothing to read there.
  bool streaming() const {
    for (const char* n : {"N1", "N2", "N3"}) {
      std::error_code ec;
      if (!(fs::file_size(tmp / (std::string("run/") + n + "/events.cpt"), ec) > 16) || ec) return false;
    }
    return true;
  }
  void expect_identical_copies() const {
    for (const char* n : {"N1", "N2", "N3"})
      for (const char* f : {"events.cpt", "meta.json"}) {
        std::string a = testutil::read_file(tmp / (std::string("run/") + n + "/" + f)),
                    b = testutil::read_file(node_trace(n) + "/" + f);
        EXPECT_FALSE(a.empty()) << n << "/" << f;
        EXPECT_TRUE(a == b) << n << "/" << f << ": controller copy " << a.size() << " bytes, node's " << b.size();
      }
  }
};

// The controller SIGKILLed mid-run: every agent stops its recorder after
// --controller-timeout, the traces stay on the nodes, `cluster gather` completes RUN/.
TEST(Cluster, ControllerKilledAgentsStopByThemselvesGatherCompletes) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  SmallRun run("clk", 3000, "--controller-timeout 2");
  ASSERT_TRUE(run.tb.ok()) << run.tb.output();
  ASSERT_TRUE(wait_until([&] { return run.streaming(); }, 60)) << testutil::read_file(run.tmp / "ctl.err");
  kill(run.ctl->pid, SIGKILL);
  run.ctl->wait(10);
  for (const char* n : {"N1", "N2", "N3"}) {
    std::string status =
        run.tmp / (std::string("local/") + fs::path(run.node_trace(n)).parent_path().parent_path().filename().string() +
                   "/" + n + "/status.json");
    ASSERT_TRUE(wait_until([&] { return testbed::is_file(status); }, 60))
        << n << " did not stop without its controller";
    auto j = nlohmann::json::parse(testutil::read_file(status));
    int code = j.value("status", -1);
    EXPECT_TRUE(code == 0 || code == 130) << n << " (130: its command passed the stop) " << j.dump();
    if (std::string(n) == "N1") {
      EXPECT_EQ(j.value("stopped_by", ""), "controller_timeout") << j.dump();
    }
  }
  auto g = testutil::run(testutil::cptrace_bin() + " cluster gather " + (run.tmp / "run"), run.tmp);
  EXPECT_EQ(g.status, 0) << g.out << g.err;
  run.expect_identical_copies();
  EXPECT_TRUE(fs::exists(run.tmp / "run/translated/events.cpt")) << g.err;
  auto m = nlohmann::json::parse(testutil::read_file(run.tmp / "run/cluster.json"));
  for (const auto& n : m["nodes"]) EXPECT_EQ(n.value("state", ""), "complete") << n.dump();
}

// One node's agent killed mid-run (its stream breaks, its recorder goes on):
// the controller takes the stream up again from the byte where it broke (a
// follow agent, which also stops the orphaned recorder); the copy is complete.
TEST(Cluster, BrokenStreamIsCompletedAtStop) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  SmallRun run("clb", 500, "");
  ASSERT_TRUE(run.tb.ok()) << run.tb.output();
  ASSERT_TRUE(wait_until([&] { return run.streaming(); }, 60)) << testutil::read_file(run.tmp / "ctl.err");
  // N2's agent: the parent of the recorder writing N2's trace.
  pid_t agent = -1;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& e : fs::directory_iterator("/proc")) {
          std::string c = testutil::read_file(e.path() / "cmdline");
          std::replace(c.begin(), c.end(), '\0', ' ');
          if (c.find(" record ") == std::string::npos || c.find("/N2/trace") == std::string::npos ||
              c.find(run.tmp.path.string()) == std::string::npos)
            continue;
          std::string stat = testutil::read_file(e.path() / "stat");
          agent = atoi(stat.substr(stat.rfind(')') + 4).c_str());
          return agent > 1;
        }
        return false;
      },
      30));
  ASSERT_NE(testutil::read_file("/proc/" + std::to_string(agent) + "/cmdline").find("cluster"), std::string::npos);
  kill(agent, SIGKILL);
  int st = run.ctl->wait(120);
  std::string err = testutil::read_file(run.tmp / "ctl.err");
  EXPECT_EQ(st, 0) << err;
  EXPECT_NE(err.find("node N2: its stream broke at +"), std::string::npos) << err;
  run.expect_identical_copies();
  EXPECT_TRUE(fs::exists(run.tmp / "run/translated/events.cpt")) << err;
}

// Ctrl-C (SIGINT to the controller) and --duration stop every node; the run is
// complete (the commands ended by the stop count as stopped, not failed).
TEST(Cluster, SigintAndDurationStopEveryNode) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  for (const std::string how : {"sigint", "duration"}) {
    SmallRun run(how == "sigint" ? "cli" : "cld", 3000, how == "duration" ? "--duration 4" : "");
    ASSERT_TRUE(run.tb.ok()) << run.tb.output();
    ASSERT_TRUE(wait_until([&] { return run.streaming(); }, 60)) << testutil::read_file(run.tmp / "ctl.err");
    if (how == "sigint") kill(run.ctl->pid, SIGINT);
    int st = run.ctl->wait(60);
    std::string err = testutil::read_file(run.tmp / "ctl.err");
    EXPECT_EQ(st, 0) << how << ": " << err;
    EXPECT_NE(err.find(how == "sigint" ? "stopping every node (Interrupt)" : "stopping every node (--duration)"),
              std::string::npos)
        << err;
    run.expect_identical_copies();
    TraceReader r(run.tmp / "run/N2");
    EXPECT_TRUE(r.meta().value("complete", false)) << how;
    EXPECT_TRUE(fs::exists(run.tmp / "run/translated/events.cpt")) << how << ": " << err;
  }
}

// A recorder that fails on its node is named with its exit status and output.
TEST(Cluster, FailedRecorderIsNamedWithItsOutput) {
  testutil::TempDir tmp;
  nlohmann::json f = {
      {"cptrace", testutil::cptrace_bin()},
      {"dir", tmp / "local"},
      {"nodes",
       {{{"name", "alpha"}, {"transport", "env"}, {"minrtt", "127.0.0.1:17711"}},
        {{"name", "beta"}, {"transport", "env"}, {"minrtt", "127.0.0.1:17712"}, {"record", {"--ring-mb", "3"}}}}}};
  std::ofstream(tmp / "nodes.json") << f.dump();
  auto r = testutil::run(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                             " --record-arg=--bogus-option -- true",
                         tmp);
  EXPECT_NE(r.status, 0);
  for (const char* n : {"alpha", "beta"}) {
    EXPECT_NE(r.err.find(std::string("node ") + n + ": recorder failed (exit"), std::string::npos) << r.err;
  }
  EXPECT_NE(r.err.find("--bogus-option"), std::string::npos) << "the recorder's own words: " << r.err;
}

// One node cannot start while the other records a long workload: every node is
// stopped at once, and the one that failed is named.
TEST(Cluster, NodeThatCannotStartStopsTheRun) {
  REQUIRE_BPF();
  testutil::TempDir tmp;
  nlohmann::json f = {{"cptrace", testutil::cptrace_bin()},
                      {"dir", tmp / "local"},
                      {"nodes",
                       {{{"name", "alpha"}, {"transport", "env"}, {"minrtt", "127.0.0.1:17711"}},
                        {{"name", "beta"},
                         {"transport", "env"},
                         {"minrtt", "127.0.0.1:17712"},
                         {"record", {"--ring-mb", "3"}},
                         {"command", {"true"}}}}}};
  std::ofstream(tmp / "nodes.json") << f.dump();
  auto r = testutil::run(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                             " --stop-linger 0 --sync-wait 2 --sync-rounds 5 -- sleep 60",
                         tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("stopping every node (node beta could not start its recorder)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node beta: recorder failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("node alpha: recorder failed"), std::string::npos) << r.err;
  std::string status;
  for (const auto& e : fs::directory_iterator(tmp / "local"))
    status = testutil::read_file(e.path() / "alpha/status.json");
  ASSERT_FALSE(status.empty());
  EXPECT_EQ(nlohmann::json::parse(status).value("stopped_by", ""), "controller") << "alpha's 60 s workload: " << status;
}

TEST(Cluster, RefusesUnreachableMissingAndMismatchedNodesByName) {
  testutil::TempDir tmp;
  std::string fake = tmp / "old-cptrace";
  std::ofstream(fake) << "#!/bin/sh\necho 'cptrace 0.0-old (trace format 1)'\n";
  chmod(fake.c_str(), 0755);
  auto attempt = [&](const nlohmann::json& bad) {
    nlohmann::json f = {{"cptrace", testutil::cptrace_bin()},
                        {"dir", tmp / "local"},
                        {"nodes", {{{"name", "good"}, {"transport", "env"}, {"minrtt", "127.0.0.1"}}, bad}}};
    std::ofstream(tmp / "nodes.json") << f.dump();
    return testutil::run(testutil::cptrace_bin() + " cluster record --check-timeout 10 " + (tmp / "nodes.json") +
                             " -o " + (tmp / "run") + " -- true",
                         tmp);
  };
  auto r = attempt({{"name", "gone"}, {"transport", "ip netns exec cptt-no-such-ns-x"}, {"minrtt", "10.0.0.1"}});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("node gone: unreachable"), std::string::npos) << r.err;
  r = attempt({{"name", "bare"}, {"transport", "env"}, {"minrtt", "10.0.0.1"}, {"cptrace", "/nonexistent/cptrace"}});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("node bare: unreachable or no cptrace at \"/nonexistent/cptrace\""), std::string::npos) << r.err;
  r = attempt({{"name", "old"}, {"transport", "env"}, {"minrtt", "10.0.0.1"}, {"cptrace", fake}});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("node old: version mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0.0-old"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("node good"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "run")) << "nothing is started when a node cannot start";
}

}  // namespace
}  // namespace cptrace
