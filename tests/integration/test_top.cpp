// `cptrace top`: the live view of a recording follows the trace while it is
// written, exits by itself when the recording completes, and its last refresh
// equals what the offline commands say of the finished trace.
#include <gtest/gtest.h>

#include <fstream>
#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/local_latency.h"
#include "record_util.h"
#include "test_util.h"

using namespace testutil;
using nlohmann::json;

namespace {

// One thread, two channels, every tuple on both, one tuple per ms: a 4.5 s recording.
std::string record_events(const std::string& trace, int events) {
  return record_cmd(trace) + " -- " + workload() + " --threads 1 --channels 2 --all-channels --pace-us 1000 --events " +
         std::to_string(events);
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

json run_json(const std::string& cmd, const TempDir& tmp) {
  RunResult r = run(cmd, tmp);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.err;
  return json::parse(r.out);
}

std::map<std::string, std::vector<uint64_t>> counts_by_channel(const json& throughput) {
  std::map<std::string, std::vector<uint64_t>> m;
  for (const json& c : throughput["channels"]) m[c["name"]] = c["counts"].get<std::vector<uint64_t>>();
  return m;
}

TEST(Top, FollowsARecordingAndEndsEqualToThroughput) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string trace = tmp / "trace";
  // Started before the trace exists: it waits for it.
  Proc top(cptrace_bin() + " top " + trace + " --json --interval 250 --pairs chan0,chan1 --wait 60", tmp / "top.out",
           tmp / "top.err");
  ASSERT_TRUE(top.wait_for("waiting up to", 10, true)) << read_file(tmp / "top.err");
  ASSERT_FALSE(fs::exists(trace));
  RunResult rec = run(record_events(trace, 4500), tmp);
  ASSERT_EQ(rec.status, 0) << rec.err;
  ASSERT_EQ(top.wait(60), 0) << read_file(tmp / "top.err");  // exited by itself, after the recorder

  std::vector<json> refreshes = json_lines(read_file(tmp / "top.out"));
  ASSERT_FALSE(refreshes.empty());
  const json& last = refreshes.back();
  EXPECT_TRUE(last["complete"].get<bool>());
  size_t live = 0;  // refreshes with events while the recording still ran
  for (size_t i = 0; i + 1 < refreshes.size(); ++i) {
    EXPECT_FALSE(refreshes[i]["complete"].get<bool>());
    if (refreshes[i]["events"].get<uint64_t>() > 0 && refreshes[i].contains("throughput")) live++;
  }
  EXPECT_GE(live, 2u) << "refreshes before the recording completed";
  EXPECT_FALSE(last["recounted"].get<bool>()) << "the incremental counts were not used";

  json tput = run_json(cptrace_bin() + " throughput " + trace + " --json", tmp);
  const json& mine = last["throughput"];
  for (const char* k : {"first_period", "periods", "period_ticks", "origin_tsc"}) EXPECT_EQ(mine[k], tput[k]) << k;
  auto want = counts_by_channel(tput), got = counts_by_channel(mine);
  EXPECT_EQ(got, want);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(std::accumulate(want["chan0"].begin(), want["chan0"].end(), uint64_t(0)), 4500u);

  json info = run_json(cptrace_bin() + " info " + trace + " --json", tmp);
  EXPECT_EQ(last["events"], info["events"]);
  EXPECT_EQ(last["seen"], info["seen"]);
  EXPECT_EQ(last["dropped"], info["dropped"]);
  EXPECT_EQ(last["filtered"], info["filtered"]);
  ASSERT_EQ(last["pairs"].size(), 1u);
  EXPECT_EQ(last["pairs"][0]["count"].get<uint64_t>(), 4500u) << "every tuple paired chan0 -> chan1";
}

// The recorder cannot tell whether top is watching: same events, complete either way.
TEST(Top, RecorderOutputIsTheSameWithAndWithoutTop) {
  REQUIRE_BPF();
  TempDir tmp;
  json without, with;
  {
    RunResult r = run(record_events(tmp / "plain", 2000), tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    without = run_json(cptrace_bin() + " info " + (tmp / "plain") + " --json", tmp);
  }
  {
    Proc top(cptrace_bin() + " top " + (tmp / "watched") + " --json --interval 100 --wait 60", tmp / "top.out",
             tmp / "top.err");
    RunResult r = run(record_events(tmp / "watched", 2000), tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(top.wait(60), 0) << read_file(tmp / "top.err");
    with = run_json(cptrace_bin() + " info " + (tmp / "watched") + " --json", tmp);
  }
  for (const json* j : {&without, &with}) {
    EXPECT_TRUE((*j)["complete"].get<bool>());
    EXPECT_TRUE((*j)["accounted"].get<bool>());
    EXPECT_EQ((*j)["dropped"].get<uint64_t>(), 0u);
  }
  EXPECT_EQ(with["events"], without["events"]);
  EXPECT_EQ(with["seen"], without["seen"]);
  ASSERT_EQ(with["channels"].size(), without["channels"].size());
  for (size_t i = 0; i < with["channels"].size(); ++i)
    EXPECT_EQ(with["channels"][i]["events"], without["channels"][i]["events"]);
  // Nothing written into the directory by top: the same files in both.
  std::vector<std::string> a, b;
  for (auto& e : fs::directory_iterator(tmp / "plain")) a.push_back(e.path().filename());
  for (auto& e : fs::directory_iterator(tmp / "watched")) b.push_back(e.path().filename());
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

// The live view's per-refresh summary is the report's summary of the same pairing.
TEST(Top, PairSummaryEqualsTheReportsSummary) {
  using namespace cptrace;
  SameNodePairing p(7, 9);
  Timeline tl{1000, 1000 + 3'000'000'000ull, 3e9, "test"};
  for (uint64_t i = 0; i < 5000; ++i) {
    uint64_t t = 1000 + i * 600'000;
    p.add({t, 7, i, 1, 1, 0, uint8_t(EventKind::User), 0});
    if (i % 7) p.add({t + 3000 + (i * 7919) % 100'000, 9, i, 1, 1, 0, uint8_t(EventKind::User), 0});
    if (i % 11 == 0) p.add({t + 50, 7, i, 1, 1, 0, uint8_t(EventKind::User), 0});  // a later duplicate
    p.add({t + 1, 8, i, 1, 1, 0, uint8_t(EventKind::User), 0});  // another channel
  }
  p.add({5, 9, 999999, 1, 1, 0, uint8_t(EventKind::User), 0});  // `to` only
  LatencySeries s = p.series(tl, 40, "a", "b", "n");
  LatencySummary want = s.summary;
  std::pair<uint64_t, uint64_t> unmatched;
  LatencySummary got = p.summary(tl, 40, unmatched);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.count, 5000u - 715u);
  for (auto [g, w] : {std::pair{got.min, want.min},
                      {got.p25, want.p25},
                      {got.p50, want.p50},
                      {got.p75, want.p75},
                      {got.p90, want.p90},
                      {got.p99, want.p99},
                      {got.max, want.max},
                      {got.lo_min, want.lo_min},
                      {got.hi_max, want.hi_max}})
    EXPECT_EQ(g, w);
  EXPECT_NEAR(got.mean, want.mean, 1e-15);
  // hi - lo of each sample there, 2 * bound here: equal up to rounding.
  EXPECT_NEAR(got.width_p50, want.width_p50, 1e-18);
  EXPECT_NEAR(got.width_max, want.width_max, 1e-18);
  EXPECT_EQ(unmatched.first, s.unmatched_from);
  EXPECT_EQ(unmatched.second, s.unmatched_to);
  EXPECT_EQ(unmatched, std::make_pair(uint64_t(715), uint64_t(1)));
}

// The live pairing bounds each pair as one-node `latency` does: none for two
// stamps of one CPU, the two CPUs' own errors for two named CPUs, the node-wide
// bound where a stamp names none; the summary is the series', and beyond the
// budget (settled) the same again.
TEST(Top, PairWidthsFollowTheStampsCpus) {
  using namespace cptrace;
  const uint8_t user = uint8_t(EventKind::User), on_cpu = uint8_t(Timebase::TscOnCpu);
  auto ev = [&](uint64_t t, uint64_t ch, uint64_t id, uint16_t cpu, uint8_t tb, uint64_t err) {
    TraceEvent e{t, ch, id, 1, 1, cpu, user, tb};
    e.ts_err = err;
    return e;
  };
  // CPU 0 is the reference (0), CPU 1 at 100 ticks, stamps of no known CPU at 300.
  auto feed = [&](SameNodePairing& p, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t t = 1000 + i * 10'000, id = i * 0x9e3779b97f4a7c15ull, d = 3000 + (i * 7919) % 5000;
      p.add(ev(t, 7, id, 0, on_cpu, 0));
      if (i % 3 == 0) p.add(ev(t + d, 9, id, 0, on_cpu, 0));  // one CPU: exact
      if (i % 3 == 1) p.add(ev(t + d, 9, id, 1, on_cpu, 100));  // CPU 1: 0 + 100
      if (i % 3 == 2) p.add(ev(t + d, 9, id, 0, 0, 300));  // no CPU named: max(40, 2 * 300)
    }
  };
  Timeline tl{1000, 1000 + 3'000'000'000ull, 1e9, "test"};  // 1 tick = 1 ns
  SameNodePairing whole(7, 9), small(7, 9, 4 << 20, "/tmp");
  feed(whole, 90000);
  feed(small, 90000);
  EXPECT_FALSE(whole.windowed());
  EXPECT_TRUE(small.windowed());
  LatencySeries s = whole.series(tl, 40, "a", "b", "n");
  std::pair<uint64_t, uint64_t> uw, us;
  LatencySummary want = s.summary, w = whole.summary(tl, 40, uw), got = small.summary(tl, 40, us);
  for (const LatencySummary* m : {&w, &got}) {
    EXPECT_EQ(m->count, 90000u);
    EXPECT_NEAR(m->lo_min, want.lo_min, 1e-15);
    EXPECT_NEAR(m->hi_max, want.hi_max, 1e-15);
    EXPECT_NEAR(m->width_p50, want.width_p50, 1e-15);
    EXPECT_NEAR(m->width_max, want.width_max, 1e-15);
  }
  EXPECT_NEAR(want.width_p50, 200e-9, 1e-15) << "the middle third: CPU 1's 100 ns, both ways";
  EXPECT_NEAR(want.width_max, 1200e-9, 1e-15);
  // Stamps of one CPU only: every pair exact.
  SameNodePairing one(7, 9);
  for (uint64_t i = 0; i < 1000; ++i) {
    one.add(ev(1000 + i * 10'000, 7, i, 1, on_cpu, 100));
    one.add(ev(4000 + i * 10'000 + i % 50, 9, i, 1, on_cpu, 100));
  }
  LatencySummary exact = one.summary(tl, 40, uw);
  EXPECT_EQ(exact.width_max, 0);
  EXPECT_EQ(exact.lo_min, exact.min);
  EXPECT_EQ(exact.hi_max, exact.max);
}

TEST(Top, BadInputIsAClearError) {
  TempDir tmp;
  std::string top = cptrace_bin() + " top ";
  {
    fs::create_directories(tmp / "garbage");
    std::ofstream(tmp / "garbage/events.cpt") << "this is not a cptrace trace at all\n";
    RunResult r = run(top + (tmp / "garbage") + " --json", tmp);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("events.cpt at byte 0: not a cptrace events file"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  {
    fs::create_directories(tmp / "empty");
    RunResult r = run(top + (tmp / "empty") + " --json --wait 0.2", tmp);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("not a cptrace trace directory (no events.cpt in it"), std::string::npos) << r.err;
  }
  {
    RunResult r = run(top + (tmp / "never") + " --json --wait 0.2", tmp);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("no such directory after waiting 0.2 s (--wait)"), std::string::npos) << r.err;
  }
  {
    std::ofstream(tmp / "file") << "x";
    RunResult r = run(top + (tmp / "file") + " --json", tmp);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("not a trace directory (not a directory)"), std::string::npos) << r.err;
  }
  {
    RunResult r = run(top + (tmp / "garbage") + " --pairs chan0 --json", tmp);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--pair 'chan0': expected FROM,TO"), std::string::npos) << r.err;
  }
}

}  // namespace

// Beyond its budget the live pairing settles paired ids as it goes: with ids
// that pair once (no repeat after the pair), the summary is exactly the
// unbudgeted one, while the maps stay within the budget.
TEST(Top, PairingBeyondTheBudgetSettlesWithTheSameSummary) {
  using namespace cptrace;
  SameNodePairing whole(7, 9), small(7, 9, 4 << 20, "/tmp");  // 32768 ids: the never-paired 15385 fit
  Timeline tl{1000, 1000 + 3'000'000'000ull, 3e9, "test"};
  for (uint64_t i = 0; i < 200000; ++i) {
    uint64_t t = 1000 + i * 10'000, id = i * 0x9e3779b97f4a7c15ull;
    for (TraceEvent e : {TraceEvent{t, 7, id, 1, 1, 0, uint8_t(EventKind::User), 0},
                         TraceEvent{t + 3000 + (i * 7919) % 100'000, 9, id, 1, 1, 0, uint8_t(EventKind::User), 0}}) {
      if (e.channel == 9 && i % 13 == 0) continue;  // never reaches `to`
      whole.add(e);
      small.add(e);
    }
  }
  EXPECT_FALSE(whole.windowed());
  EXPECT_TRUE(small.windowed());
  std::pair<uint64_t, uint64_t> uw, us;
  LatencySummary w = whole.summary(tl, 40, uw), s = small.summary(tl, 40, us);
  EXPECT_EQ(s.count, w.count);
  EXPECT_EQ(s.count, 200000u - 15385u);
  EXPECT_EQ(us, uw);
  for (auto [g, x] : {std::pair{s.min, w.min},
                      {s.p25, w.p25},
                      {s.p50, w.p50},
                      {s.p75, w.p75},
                      {s.p90, w.p90},
                      {s.p99, w.p99},
                      {s.max, w.max},
                      {s.lo_min, w.lo_min},
                      {s.hi_max, w.hi_max}})
    EXPECT_EQ(g, x);
  EXPECT_NEAR(s.mean, w.mean, 1e-15);
}
