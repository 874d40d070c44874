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
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cptrace.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "translate/latency.h"
#include "translate/rank_select.h"
#include "truth_util.h"

namespace cptrace {
namespace {

using nlohmann::json;
using testbed::skip_reason;

std::string in_ns(const std::string& ns, const std::string& cmd) { return "ip netns exec " + ns + " " + cmd; }

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

TEST(TopRun, ThreeNodeRunEveryLiveBoundHoldsTheTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  if (!record_supports_peers()) GTEST_SKIP() << "SKIPPED: `cptrace record` has no --peers/--sync-rate";
  testbed::Testbed tb("lvw", 3, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin(), wl = (testutil::build_dir() / "tests" / "pipeline").string();
  const std::string run = tmp / "run";
  std::filesystem::create_directory(run);
  // Started before any node directory exists: it waits for them.
  testutil::Proc top(bin + " top " + run + " --json --interval 500 --pair A.out,C.in --reference A --wait 60",
                     tmp / "top.out", tmp / "top.err");
  const char* names[] = {"A", "B", "C"};
  const char* sims[] = {"1500000000,40", "-2700000000,-150", "900000000,200"};
  const char* peers[] = {"10.77.2.2:7711,10.77.3.2:7711", "10.77.1.2:7711,10.77.3.2:7711",
                         "10.77.1.2:7711,10.77.2.2:7711"};
  const std::string roles[] = {"--role A --connect 10.77.2.2:9000 --tuples 3000 --rate 500 --connect-timeout 30",
                               "--role B --listen 10.77.2.2:9000 --connect 10.77.3.2:9000 --connect-timeout 30",
                               "--role C --listen 10.77.3.2:9000"};
  auto kg = testutil::run(bin + " keygen -o " + (tmp / "key"), tmp);
  ASSERT_EQ(kg.status, 0) << kg.err;
  std::vector<std::unique_ptr<testutil::Proc>> rec;
  for (int k = 2; k >= 0; --k)  // C first: B connects to it, A to B
    rec.push_back(std::make_unique<testutil::Proc>(
        in_ns(tb.ns(k + 1), bin + " record --no-progress --node " + names[k] + " --peers " + peers[k] + " --key " +
                                (tmp / "key") + " --sync-rounds 40 --sync-rate 2 --sync-wait 20 --simulate-clock " +
                                sims[k] + " -o " + run + "/" + names[k] + " -- " + wl + " " + roles[k]),
        tmp / (std::string(names[k]) + ".out"), tmp / (std::string(names[k]) + ".err")));
  // What the recorders have written, when (the shared CLOCK_MONOTONIC): the view's
  // lag is measured against it, so a recorder slow to write is not the view's lag.
  std::vector<Written> written;
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done) {
      Written w{testbed::mono_ns(), {}};
      for (const char* n : names) {
        struct stat st {};
        w.bytes[n] = stat((run + "/" + n + "/events.cpt").c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
      }
      written.push_back(std::move(w));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (auto& p : rec) EXPECT_EQ(p->wait(180), 0) << testutil::read_file(p->err_path);
  EXPECT_EQ(top.wait(60), 0) << testutil::read_file(top.err_path);
  done = true;
  watch.join();
  ASSERT_FALSE(HasFailure());

  std::vector<json> refreshes;
  {
    std::istringstream in(testutil::read_file(top.out_path));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) refreshes.push_back(json::parse(line));
  }
  ASSERT_GE(refreshes.size(), 3u);
  ASSERT_TRUE(refreshes.back()["complete"].get<bool>());

  std::map<std::string, NodeTrace> nodes;
  for (const char* n : names) nodes[n] = read_node(run + "/" + n);
  const NodeTrace& ref = nodes["A"];
  auto mono = [&](const std::string& node, uint64_t ts) { return truth::interp(nodes[node].clock, ts, true); };
  auto truth_ticks = [&](const std::string& node, uint64_t ts) {
    return node == "A" ? (long double)ts : truth::interp(ref.clock, mono(node, ts), false);
  };
  const uint64_t from = cp_channel_id("A.out"), to = cp_channel_id("C.in");

  size_t with_tuples = 0, live = 0, extrapolated = 0;
  for (const json& r : refreshes) {
    // The events each node's part of this refresh covers, and how far behind it is.
    std::map<std::string, size_t> covered;
    const int64_t poll = r["polled_mono_ns"].get<int64_t>();
    for (const json& n : r["nodes"]) {
      const std::string name = n["node"];
      size_t k = n["records"].get<size_t>();
      ASSERT_LE(k, nodes[name].events.size()) << name;
      covered[name] = k;
      // Every byte the recorder had written 2 s before this refresh's poll is in it.
      uint64_t read = n["bytes_read"].get<uint64_t>();
      for (const Written& w : written) {
        if (w.mono_ns > poll - 2000000000LL) continue;
        EXPECT_GE(read, w.bytes.at(name)) << "refresh " << r["refresh"] << " is more than 2 s behind " << name
                                          << "'s file: " << read << " bytes read, " << w.bytes.at(name) << " written "
                                          << double(poll - w.mono_ns) / 1e9 << " s before its poll";
      }
    }
    if (r["pairs"].empty()) continue;  // before node A appeared (--reference A)
    // The tuples it covers: the first A.out on A and the first C.in on C, as latency joins.
    std::unordered_map<uint64_t, uint64_t> a_ts;
    for (size_t i = 0; i < covered["A"]; ++i) {
      const Ev& e = nodes["A"].events[i];
      if (e.kind == uint8_t(EventKind::User) && e.channel == from) a_ts.emplace(e.tuple, e.ts);
    }
    std::vector<long double> truth;
    std::unordered_map<uint64_t, bool> seen;
    for (size_t i = 0; i < covered["C"]; ++i) {
      const Ev& e = nodes["C"].events[i];
      if (e.kind != uint8_t(EventKind::User) || e.channel != to || !seen.emplace(e.tuple, true).second) continue;
      auto it = a_ts.find(e.tuple);
      if (it != a_ts.end()) truth.push_back(truth_ticks("C", e.ts) - (long double)it->second);
    }
    std::sort(truth.begin(), truth.end());
    const json& p = r["pairs"][0];
    EXPECT_EQ(p["matched"].get<size_t>(), truth.size()) << r.dump();
    if (p["count"].get<size_t>() == 0) continue;
    EXPECT_EQ(p["count"].get<size_t>(), truth.size()) << r.dump();
    with_tuples++;
    // The covered C events after C's newest round with A: bounded by extrapolation.
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
    // C events newer than C's newest round: bounded by the drift bound's extrapolation.
    for (const json& n : r["nodes"])
      if (n["node"] == "C" && n["newest_tsc"].get<uint64_t>() > n["last_round_tsc"].get<uint64_t>()) extrapolated++;
    printf("  [top run] refresh %3d: %5zu tuples  p50 width %6lld ticks  max width %6lld ticks\n",
           r["refresh"].get<int>(), truth.size(),
           (long long)(p["p50"]["ticks_hi"].get<int64_t>() - p["p50"]["ticks_lo"].get<int64_t>()),
           (long long)(p["max"]["ticks_hi"].get<int64_t>() - p["max"]["ticks_lo"].get<int64_t>()));
  }
  EXPECT_GE(live, 2u) << "too few refreshes while recording to mean anything";
  EXPECT_GE(extrapolated, 1u) << "no refresh bounded events past the last round";
  EXPECT_EQ(refreshes.back()["pairs"][0]["count"].get<size_t>(), 3000u);

  // The last refresh is translate (the same clock model) + latency, value for value.
  auto tr = testutil::run(bin + " translate " + run + "/A " + run + "/B " + run +
                              "/C --reference A --clock-model piecewise --inputs rounds -o " + (tmp / "tr"),
                          tmp);
  ASSERT_EQ(tr.status, 0) << tr.out << tr.err;
  LatencyResult res = latency(tmp / "tr", "A.out", "C.in");
  ASSERT_EQ(res.rows.size(), 3000u);
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
  auto tb2 =
      testutil::run(bin + " translate " + run + "/A " + run + "/B " + run + "/C --reference A -o " + (tmp / "tb"), tmp);
  ASSERT_EQ(tb2.status, 0) << tb2.out << tb2.err;
  LatencyResult best = latency(tmp / "tb", "A.out", "C.in");
  std::vector<int64_t> best_est;
  for (const LatencyRow& row : best.rows) best_est.push_back(row.ticks);
  std::sort(best_est.begin(), best_est.end());
  for (size_t q = 0; q < 4; ++q) {
    int64_t e = best_est[nearest_rank_index(best_est.size(), kQ[q])];
    EXPECT_GE(e, last[kQuantiles[q]]["ticks_lo"].get<int64_t>()) << kQuantiles[q];
    EXPECT_LE(e, last[kQuantiles[q]]["ticks_hi"].get<int64_t>()) << kQuantiles[q];
  }
  printf(
      "  [top run] %zu refreshes, %zu with tuples, %zu while recording (%zu past C's last round); last p50 %lld [%lld, "
      "%lld] ticks\n",
      refreshes.size(), with_tuples, live, extrapolated, (long long)last["p50"]["ticks"].get<int64_t>(),
      (long long)last["p50"]["ticks_lo"].get<int64_t>(), (long long)last["p50"]["ticks_hi"].get<int64_t>());
}

}  // namespace
}  // namespace cptrace
