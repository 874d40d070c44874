// `cptrace top RUN` on a run being recorded: three testbed nodes record the
// pipeline workload (A -> B -> C over TCP) into RUN/A, RUN/B, RUN/C with MinRTT
// rounds between them (start, a stream while recording, stop) and simulated clocks
// (offsets of seconds, skews of tens to hundreds of ppm), while `top RUN --json
// --pair A.out,C.in` follows them.
//
// Truth as in test_translate_e2e.cpp: the namespaces share one CLOCK_MONOTONIC, and
// each node's stream maps its (simulated) TSC onto it, so a tuple's true duration
// on A's TSC is known. Every refresh says how many event records of each node it
// read (the first `records` of that node's finished file, in file order), so the
// test rebuilds exactly the tuple set the refresh covers and checks that every
// shown percentile bound holds the true percentile of that set; that every byte a
// recorder had written 2 s before the refresh's poll (sizes sampled by the test on
// the shared clock) was read; and that the last refresh equals translate +
// latency on the finished run.
//
// And the same on a run of `cptrace cluster record` (4 nodes over `ip netns
// exec`): RUN also holds cluster.json, RUN/translated and report.html, and the
// lag is measured against each node's own copy, the file its agent streams from;
// and each node's start meta.json reaches RUN while it records.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cptrace.h"
#include "pipeline_util.h"
#include "synthetic_trace.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "tables/rank_select.h"
#include "truth_util.h"

namespace cptrace {
namespace {

using nlohmann::json;
using testbed::skip_reason;

bool record_supports_peers() {
  testutil::TempDir tmp;
  auto r = testutil::run(testutil::cptrace_bin() + " record --help", tmp);
  return r.out.find("--peers") != std::string::npos && r.out.find("--sync-rate") != std::string::npos;
}

struct Ev {
  uint64_t channel, tuple, ts;
  uint8_t kind;
};

struct NodeTrace {
  std::vector<Ev> events;  // file order
  std::vector<ClockPoint> clock;
};

NodeTrace read_node(const std::string& dir) {
  TraceReader r(dir);
  EXPECT_FALSE(r.error()) << r.error()->what();
  NodeTrace n;
  n.clock = r.clock_map().points();
  r.for_each_batch([&](const std::vector<TraceEvent>& evs) {
    for (const TraceEvent& e : evs) n.events.push_back({e.channel, e.tuple, e.ts, e.kind});
  });
  return n;
}

// The size of each node's events.cpt at an instant.
struct Written {
  int64_t mono_ns;
  std::map<std::string, uint64_t> bytes;
};

const char* kQuantiles[] = {"p50", "p90", "p99", "max"};
const double kQ[] = {0.5, 0.9, 0.99, 1.0};

// Samples, every 100 ms on the shared CLOCK_MONOTONIC, the size of the file each
// node's data comes from (`path_of`, "" while it does not exist): the view's lag
// is measured against it, so a writer slow to write is not the view's lag.
class WrittenSampler {
 public:
  WrittenSampler(std::vector<std::string> names, std::function<std::string(const std::string&)> path_of)
      : thread_([this, names, path_of] {
          while (!done_) {
            Written w{testbed::mono_ns(), {}};
            for (const std::string& n : names) {
              struct stat st {};
              std::string p = path_of(n);
              w.bytes[n] = !p.empty() && stat(p.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
            }
            written_.push_back(std::move(w));
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~WrittenSampler() { stop(); }
  const std::vector<Written>& stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return written_;
  }

 private:
  std::atomic<bool> done_{false};
  std::vector<Written> written_;
  std::thread thread_;
};

// A run followed by `top RUN --json --pair FROM,TO`: the checks of both tests.
struct LiveRun {
  std::string run;  // RUN
  std::vector<std::string> names;  // its nodes, the reference first, TO's node last
  std::string from, to;  // channels: FROM on the reference, TO on the last node
  size_t tuples = 0;
  std::string best;  // translate with its default clock model, of the finished run
};

std::vector<json> read_refreshes(const std::string& path) {
  std::vector<json> out;
  std::istringstream in(testutil::read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// For every refresh: each shown percentile bound holds the true percentile of
// exactly the tuples it covers, and every byte of each node's file written 2 s
// before its poll was read. The last refresh equals translate (the same clock
// model) + latency, and the default translate's estimates lie in its bounds.
void check_live_run(const LiveRun& lr, const std::vector<json>& refreshes, const std::vector<Written>& written,
                    const testutil::TempDir& tmp) {
  ASSERT_GE(refreshes.size(), 3u);
  ASSERT_TRUE(refreshes.back()["complete"].get<bool>());
  const std::string &refname = lr.names.front(), &last_node = lr.names.back();

  std::map<std::string, NodeTrace> nodes;
  for (const std::string& n : lr.names) nodes[n] = read_node(lr.run + "/" + n);
  const NodeTrace& ref = nodes[refname];
  auto mono = [&](const std::string& node, uint64_t ts) { return truth::interp(nodes[node].clock, ts, true); };
  auto truth_ticks = [&](const std::string& node, uint64_t ts) {
    return node == refname ? (long double)ts : truth::interp(ref.clock, mono(node, ts), false);
  };
  const uint64_t from = cp_channel_id(lr.from.c_str()), to = cp_channel_id(lr.to.c_str());

  size_t with_tuples = 0, live = 0, extrapolated = 0;
  int64_t worst_lag_ns = 0;
  for (const json& r : refreshes) {
    // The events each node's part of this refresh covers, and how far behind it is.
    std::map<std::string, size_t> covered;
    const int64_t poll = r["polled_mono_ns"].get<int64_t>();
    for (const json& n : r["nodes"]) {
      const std::string name = n["node"];
      ASSERT_TRUE(nodes.count(name)) << "not a node of the run: " << name;
      size_t k = n["records"].get<size_t>();
      ASSERT_LE(k, nodes[name].events.size()) << name;
      covered[name] = k;
      // Every byte the node's file held 2 s before this refresh's poll is in it.
      uint64_t read = n["bytes_read"].get<uint64_t>();
      for (const Written& w : written) {
        if (w.bytes.at(name) > read) worst_lag_ns = std::max(worst_lag_ns, poll - w.mono_ns);
        if (w.mono_ns > poll - 2000000000LL) continue;
        EXPECT_GE(read, w.bytes.at(name)) << "refresh " << r["refresh"] << " is more than 2 s behind " << name
                                          << "'s file: " << read << " bytes read, " << w.bytes.at(name) << " written "
                                          << double(poll - w.mono_ns) / 1e9 << " s before its poll";
      }
    }
    if (r["pairs"].empty()) continue;  // before the reference appeared
    // The tuples it covers: the first FROM on the reference and the first TO on the last node, as latency joins.
    std::unordered_map<uint64_t, uint64_t> a_ts;
    for (size_t i = 0; i < covered[refname]; ++i) {
      const Ev& e = nodes[refname].events[i];
      if (e.kind == uint8_t(EventKind::User) && e.channel == from) a_ts.emplace(e.tuple, e.ts);
    }
    std::vector<long double> truth;
    std::unordered_map<uint64_t, bool> seen;
    for (size_t i = 0; i < covered[last_node]; ++i) {
      const Ev& e = nodes[last_node].events[i];
      if (e.kind != uint8_t(EventKind::User) || e.channel != to || !seen.emplace(e.tuple, true).second) continue;
      auto it = a_ts.find(e.tuple);
      if (it != a_ts.end()) truth.push_back(truth_ticks(last_node, e.ts) - (long double)it->second);
    }
    std::sort(truth.begin(), truth.end());
    const json& p = r["pairs"][0];
    EXPECT_EQ(p["reference"], refname);
    EXPECT_EQ(p["matched"].get<size_t>(), truth.size()) << r.dump();
    if (p["count"].get<size_t>() == 0) continue;
    EXPECT_EQ(p["count"].get<size_t>(), truth.size()) << r.dump();
    with_tuples++;
    for (size_t q = 0; q < 4; ++q) {
      const json& v = p[kQuantiles[q]];
      long double t = truth[nearest_rank_index(truth.size(), kQ[q])];
      EXPECT_LE(v["ticks_lo"].get<int64_t>(), t) << kQuantiles[q] << " refresh " << r["refresh"] << " " << p.dump();
      EXPECT_GE(v["ticks_hi"].get<int64_t>(), t) << kQuantiles[q] << " refresh " << r["refresh"] << " " << p.dump();
      EXPECT_LE(v["ticks_lo"].get<int64_t>(), v["ticks"].get<int64_t>());
      EXPECT_GE(v["ticks_hi"].get<int64_t>(), v["ticks"].get<int64_t>());
    }
    if (r["complete"].get<bool>()) continue;
    live++;
    // Events of the last node newer than its newest round: bounded by the drift bound's extrapolation.
    for (const json& n : r["nodes"])
      if (n["node"] == last_node && n["newest_tsc"].get<uint64_t>() > n["last_round_tsc"].get<uint64_t>())
        extrapolated++;
    printf("  [top run] refresh %3d: %5zu tuples  p50 width %6lld ticks  max width %6lld ticks\n",
           r["refresh"].get<int>(), truth.size(),
           (long long)(p["p50"]["ticks_hi"].get<int64_t>() - p["p50"]["ticks_lo"].get<int64_t>()),
           (long long)(p["max"]["ticks_hi"].get<int64_t>() - p["max"]["ticks_lo"].get<int64_t>()));
  }
  EXPECT_GE(live, 2u) << "too few refreshes while recording to mean anything";
  EXPECT_GE(extrapolated, 1u) << "no refresh bounded events past the last round";
  EXPECT_EQ(refreshes.back()["pairs"][0]["count"].get<size_t>(), lr.tuples);

  // The last refresh is translate (the same clock model) + latency, value for value.
  std::string dirs;
  for (const std::string& n : lr.names) dirs += " " + lr.run + "/" + n;
  const std::string bin = testutil::cptrace_bin();
  auto tr = testutil::run(bin + " translate" + dirs + " --reference " + refname +
                              " --clock-model piecewise --inputs rounds -o " + (tmp / "tr"),
                          tmp);
  ASSERT_EQ(tr.status, 0) << tr.out << tr.err;
  LatencyResult res = latency(tmp / "tr", lr.from, lr.to);
  ASSERT_EQ(res.rows.size(), lr.tuples);
  std::vector<int64_t> est, lo, hi;
  for (const LatencyRow& row : res.rows)
    est.push_back(row.ticks), lo.push_back(row.ticks_lo), hi.push_back(row.ticks_hi);
  std::sort(est.begin(), est.end()), std::sort(lo.begin(), lo.end()), std::sort(hi.begin(), hi.end());
  const json& last = refreshes.back()["pairs"][0];
  for (size_t q = 0; q < 4; ++q) {
    size_t k = nearest_rank_index(est.size(), kQ[q]);
    EXPECT_EQ(last[kQuantiles[q]]["ticks"].get<int64_t>(), est[k]) << kQuantiles[q];
    EXPECT_EQ(last[kQuantiles[q]]["ticks_lo"].get<int64_t>(), lo[k]) << kQuantiles[q];
    EXPECT_EQ(last[kQuantiles[q]]["ticks_hi"].get<int64_t>(), hi[k]) << kQuantiles[q];
  }
  // translate's default (linear clocks, best method) estimates inside the live final bounds.
  LatencyResult best = latency(lr.best, lr.from, lr.to);
  ASSERT_EQ(best.rows.size(), lr.tuples);
  std::vector<int64_t> best_est;
  for (const LatencyRow& row : best.rows) best_est.push_back(row.ticks);
  std::sort(best_est.begin(), best_est.end());
  for (size_t q = 0; q < 4; ++q) {
    int64_t e = best_est[nearest_rank_index(best_est.size(), kQ[q])];
    EXPECT_GE(e, last[kQuantiles[q]]["ticks_lo"].get<int64_t>()) << kQuantiles[q];
    EXPECT_LE(e, last[kQuantiles[q]]["ticks_hi"].get<int64_t>()) << kQuantiles[q];
  }
  printf(
      "  [top run] %zu refreshes, %zu with tuples, %zu while recording (%zu past %s's last round); largest lag "
      "%.2f s; last p50 %lld [%lld, %lld] ticks\n",
      refreshes.size(), with_tuples, live, extrapolated, last_node.c_str(), double(worst_lag_ns) / 1e9,
      (long long)last["p50"]["ticks"].get<int64_t>(), (long long)last["p50"]["ticks_lo"].get<int64_t>(),
      (long long)last["p50"]["ticks_hi"].get<int64_t>());
}

TEST(TopRun, ThreeNodeRunEveryLiveBoundHoldsTheTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  if (!record_supports_peers()) GTEST_SKIP() << "SKIPPED: `cptrace record` has no --peers/--sync-rate";
  testbed::Testbed tb("lvw", 3, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin();
  const std::string run = tmp / "run";
  std::filesystem::create_directory(run);
  // Started before any node directory exists: it waits for them.
  testutil::Proc top(bin + " top " + run + " --json --interval 500 --pair A.out,C.in --reference A --wait 60",
                     tmp / "top.out", tmp / "top.err");
  auto kg = testutil::run(bin + " keygen -o " + (tmp / "key"), tmp);
  ASSERT_EQ(kg.status, 0) << kg.err;
  auto rec = testutil::start_three_node_pipeline(
      tb, tmp, {run, tmp / "key", 3000, "--sync-rounds 40 --sync-rate 2 --sync-wait 20"});
  // What the recorders have written, when.
  WrittenSampler sampler({"A", "B", "C"}, [&](const std::string& n) { return run + "/" + n + "/events.cpt"; });
  for (auto& p : rec) EXPECT_EQ(p->wait(180), 0) << testutil::read_file(p->err_path);
  EXPECT_EQ(top.wait(60), 0) << testutil::read_file(top.err_path);
  const std::vector<Written>& written = sampler.stop();
  ASSERT_FALSE(HasFailure());

  auto tb2 = testutil::run(testutil::translate_three_nodes(run, "", tmp / "tb"), tmp);
  ASSERT_EQ(tb2.status, 0) << tb2.out << tb2.err;
  check_live_run({run, {"A", "B", "C"}, "A.out", "C.in", 3000, tmp / "tb"}, read_refreshes(top.out_path), written, tmp);
}

std::string ip(int k) { return "10.77." + std::to_string(k) + ".2"; }

// `cptrace cluster record` over `ip netns exec`: N1 -> N2 -> N3 -> N4, each node
// with a simulated clock, MinRTT rounds at the start, every 0.5 s while recording
// (--sync-rate 2) and at the stop; `top RUN` follows from before RUN exists,
// with no --reference (cluster.json's first node), and the lag is measured
// against each node's OWN copy (the file its agent streams from), so the
// streaming delay counts.
TEST(TopRun, ClusterRunLiveBoundsHoldAndLagUnderTwoSeconds) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  constexpr int kNodes = 4;
  constexpr size_t kTuples = 3000;
  testbed::Testbed tb("ctr", kNodes, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin(), wl = (testutil::build_dir() / "tests" / "pipeline").string();
  const std::string run = tmp / "run";
  const char* sims[] = {"1500000000,40", "-2700000000,-150", "900000000,200", "-800000000,90"};
  json nodes = json::array();
  std::vector<std::string> names;
  for (int k = 1; k <= kNodes; ++k) {
    std::string name = "N" + std::to_string(k);
    names.push_back(name);
    std::vector<std::string> cmd = {wl, "--stage", name};
    std::vector<std::string> role =
        k == 1 ? std::vector<std::string>{"--role",
                                          "A",
                                          "--connect",
                                          ip(2) + ":9000",
                                          "--tuples",
                                          std::to_string(kTuples),
                                          "--rate",
                                          "500",
                                          "--connect-timeout",
                                          "40"}
        : k == kNodes
            ? std::vector<std::string>{"--role", "C", "--listen", ip(k) + ":9000"}
            : std::vector<std::string>{
                  "--role", "B", "--listen", ip(k) + ":9000", "--connect", ip(k + 1) + ":9000", "--connect-timeout",
                  "40"};
    cmd.insert(cmd.end(), role.begin(), role.end());
    nodes.push_back({{"name", name},
                     {"transport", {"ip", "netns", "exec", tb.ns(k)}},
                     {"minrtt", ip(k)},
                     {"command", cmd},
                     {"record", {"--simulate-clock", sims[k - 1]}}});
  }
  json file = {{"cptrace", bin}, {"dir", tmp / "local"}, {"nodes", nodes}};
  std::ofstream(tmp / "nodes.json") << file.dump(2);
  const std::string from = "N1.out", to = "N" + std::to_string(kNodes) + ".in";
  std::string path;
  for (int k = 1; k <= kNodes; ++k)
    path +=
        k == 1 ? "N1.out" : ",N" + std::to_string(k) + ".in" + (k < kNodes ? ",N" + std::to_string(k) + ".out" : "");

  // Started before RUN exists: it waits for it.
  testutil::Proc top(bin + " top " + run + " --json --interval 500 --pair " + from + "," + to + " --wait 60",
                     tmp / "top.out", tmp / "top.err");
  // Each node's own copy: DIR/RUN-ID/NODE/trace/events.cpt on the node.
  WrittenSampler sampler(names, [&](const std::string& n) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tmp / "local", ec))
      return (e.path() / n / "trace" / "events.cpt").string();
    return std::string();
  });
  testutil::Proc ctl(bin + " cluster record " + (tmp / "nodes.json") + " -o " + run +
                         " --sync-rounds 40 --sync-wait 20 --record-arg=--sync-rate=2 --path " + path,
                     tmp / "ctl.out", tmp / "ctl.err");
  // While recording, each RUN/NODE/meta.json is the recorder's first one (its TSC
  // skew across CPUs widens the live bounds), streamed long before the final one.
  auto is_start_meta = [&](const std::string& n) {
    try {
      json m = json::parse(testutil::read_file(run + "/" + n + "/meta.json"));
      return !m.value("complete", true) && m.contains("tsc") && m.value("node", "") == n;
    } catch (const std::exception&) {
      return false;  // not there yet
    }
  };
  std::set<std::string> start_meta;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (start_meta.size() < names.size() && std::chrono::steady_clock::now() < until) {
    for (const std::string& n : names)
      if (is_start_meta(n)) start_meta.insert(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(start_meta.size(), names.size()) << "nodes whose start meta.json was seen in RUN while recording";
  EXPECT_EQ(ctl.wait(180), 0) << testutil::read_file(ctl.out_path) << testutil::read_file(ctl.err_path);
  EXPECT_EQ(top.wait(60), 0) << testutil::read_file(top.err_path);
  const std::vector<Written>& written = sampler.stop();
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(std::filesystem::exists(run + "/report.html"));
  EXPECT_TRUE(std::filesystem::exists(run + "/cluster.json"));
  std::vector<json> refreshes = read_refreshes(top.out_path);
  ASSERT_FALSE(refreshes.empty());
  EXPECT_EQ(refreshes.back()["nodes"].size(), size_t(kNodes)) << "RUN/translated is no node";
  // Rounds while recording: the stream phase, not only start and stop.
  size_t stream_rounds = 0;
  for (const std::string& n : names) {
    TraceReader r(run + "/" + n);
    for (const SyncRound& s : r.sync_rounds()) stream_rounds += s.phase == "stream";
  }
  EXPECT_GT(stream_rounds, 0u) << "no MinRTT round while recording: --record-arg=--sync-rate=2 not passed on";
  check_live_run({run, names, from, to, kTuples, run + "/translated"}, refreshes, written, tmp);
}

// A cluster whose nodes take seconds to start (their cptrace behind a wrapper
// that sleeps 16 s before the agent, as dozens of nodes over ssh do): `top RUN
// --gone-after 8`, started before RUN exists, waits while cluster.json says
// the nodes are starting instead of calling the recorders gone (exit 3, as it
// did), and follows the run to its end. 8 s: a recording node is silent ~1 s
// after its first frame here (its start rounds), so a host several times
// slower still keeps below it.
TEST(TopRun, WaitsWhileClusterNodesAreStarting) {
  REQUIRE_BPF();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin(), slow = tmp / "slow-cptrace", run = tmp / "run";
  std::ofstream(slow) << "#!/bin/sh\nif [ \"$1\" = cluster ]; then sleep 16; fi\nexec " << bin << " \"$@\"\n";
  ASSERT_EQ(chmod(slow.c_str(), 0755), 0);
  json f = {{"cptrace", slow},
            {"dir", tmp / "local"},
            {"nodes",
             {{{"name", "alpha"}, {"transport", "env"}, {"minrtt", "127.0.0.1:17731"}},
              {{"name", "beta"}, {"transport", "env"}, {"minrtt", "127.0.0.1:17732"}}}}};
  std::ofstream(tmp / "nodes.json") << f.dump();
  testutil::Proc top(bin + " top " + run + " --json --interval 100 --gone-after 8 --wait 30", tmp / "top.out",
                     tmp / "top.err");
  auto ctl = testutil::run(bin + " cluster record " + (tmp / "nodes.json") + " -o " + run +
                               " --sync-rounds 5 --sync-wait 5 --stop-linger 0 -- sleep 1",
                           tmp);
  EXPECT_EQ(ctl.status, 0) << ctl.err;
  EXPECT_EQ(top.wait(60), 0) << testutil::read_file(top.err_path);
  std::vector<json> refreshes = read_refreshes(top.out_path);
  ASSERT_FALSE(refreshes.empty());
  // Refreshes while both were starting: longer than --gone-after.
  int64_t first = -1, last = -1;
  for (const json& r : refreshes)
    if (r["starting"] == json::array({"alpha", "beta"}))
      last = r["polled_mono_ns"].get<int64_t>(), first = first < 0 ? last : first;
  EXPECT_GT(last - first, int64_t(10e9)) << "the nodes were starting for 16 s";
  EXPECT_EQ(refreshes.back()["state"], "complete");
  EXPECT_TRUE(refreshes.back()["starting"].empty());
  json m = json::parse(testutil::read_file(run + "/cluster.json"));
  for (const json& n : m["nodes"]) EXPECT_EQ(n["state"], "complete") << n.dump();
}

// A run whose node b stopped without finishing (its meta.json not complete,
// its file not growing): top RUN ends with exit 3 and names b, not a.
TEST(TopRun, GoneNamesTheNodesThatDidNotFinish) {
  testutil::TempDir tmp;
  const std::string run = tmp / "run";
  for (const char* node : {"a", "b"}) {
    testutil::SyntheticTrace t;
    t.channels = {{11, "x"}};
    for (uint64_t i = 0; i < 100; ++i) t.add(11, testutil::SyntheticTrace::kOrigin + 1000 * i, i);
    const std::string dir = run + "/" + node;
    t.write(dir);
    json meta = json::parse(testutil::read_file(dir + "/meta.json"));
    meta["node"] = node;
    meta["complete"] = std::string(node) == "a";
    std::ofstream(dir + "/meta.json", std::ios::trunc) << meta.dump();
  }
  testutil::Proc top(testutil::cptrace_bin() + " top " + run + " --json --interval 100 --gone-after 1", tmp / "top.out",
                     tmp / "top.err");
  EXPECT_EQ(top.wait(30), 3);
  std::string err = testutil::read_file(top.err_path);
  EXPECT_NE(err.find("has grown for 1 s and not all are complete (incomplete: b)"), std::string::npos) << err;
}

}  // namespace
}  // namespace cptrace
