// The load generator, the sink and maxrate across the namespace testbed: the
// generator in node 1, the sink in node 2, every tuple through the router.
// Asserts the pacing (achieved rate = requested rate, from the generator's own
// count and clock), the exactly-once delivery of ids, that maxrate finds a
// throttled sink's rate within one step, and that a recorded generator and sink
// log one cp_logTS per tuple (and the recorder none of its own).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "record_util.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"

using namespace testbed;
using nlohmann::json;

namespace {

std::string cpt() { return testutil::cptrace_bin(); }

// Runs `cmd` inside node k's namespace, in the background.
std::unique_ptr<testutil::Proc> start_in(const Testbed& tb, int k, const std::string& cmd, const testutil::TempDir& tmp,
                                         const std::string& name) {
  return std::make_unique<testutil::Proc>("ip netns exec " + tb.ns(k) + " " + cmd, tmp / (name + ".out"),
                                          tmp / (name + ".err"));
}

json parse_json(const std::string& s, const std::string& what) {
  json j = json::parse(s, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << what << " printed no JSON: " << s;
  return j;
}

// A sink in node 2 on `port` (+1 control) that exits after one round; waits until it listens.
std::unique_ptr<testutil::Proc> start_sink(const Testbed& tb, int port, const std::string& extra,
                                           const testutil::TempDir& tmp) {
  auto p = start_in(tb, 2, cpt() + " sink --json --listen " + std::to_string(port) + " " + extra, tmp, "sink");
  EXPECT_TRUE(p->wait_for("listening on", 10, true)) << testutil::read_file(p->err_path);
  return p;
}

void check_one_round(const std::string& transport) {
  REQUIRE_TESTBED();
  Testbed tb("gen" + transport, 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  auto sink = start_sink(tb, 7000, "--rounds 1" + std::string(transport == "udp" ? " --udp" : ""), tmp);
  // A modest rate the machine sustains even while it is busy: this checks the
  // pacing, not the machine's speed.
  const double rate = 5000, secs = 4;
  auto r = testutil::run("ip netns exec " + tb.ns(1) + " " + cpt() +
                             " gen --json --to 10.77.2.2:7000 --control 10.77.2.2:7001 --rate 5000 --duration 4" +
                             " --size 100" + (transport == "udp" ? " --udp" : ""),
                         tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json g = parse_json(r.out, "gen");
  EXPECT_EQ(g["scheduled"].get<uint64_t>(), uint64_t(rate * secs));
  EXPECT_EQ(g["emitted"].get<uint64_t>(), uint64_t(rate * secs));
  // The rate is exact up to the last tuple's lateness (its emission instant minus its
  // slot), which is at most the largest lateness the generator measured in this run:
  // never early, and late by no more than it says.
  double achieved = g["achieved_rate"], elapsed = g["elapsed_s"];
  double sched_s = (rate * secs - 1) / rate, late_max_s = g["lateness_ns"]["max"].get<double>() / 1e9;
  const double ns = 1e-9;  // slots are whole nanoseconds
  EXPECT_GE(elapsed, sched_s - ns) << g.dump();
  EXPECT_LE(elapsed - sched_s, late_max_s + ns) << g.dump();
  EXPECT_LE(achieved, rate * (1 + 1e-9)) << g.dump();
  printf("      achieved %.2f/s for %.0f/s, lateness max %.3f ms\n", achieved, rate, late_max_s * 1e3);
  EXPECT_EQ(g["send_errors"].get<uint64_t>(), 0u);

  ASSERT_EQ(sink->wait(30), 0) << testutil::read_file(sink->err_path) << testutil::read_file(sink->out_path);
  json s = parse_json(testutil::read_file(sink->out_path), "sink");
  ASSERT_EQ(s["rounds"].size(), 1u);
  const json& round = s["rounds"][0];
  EXPECT_EQ(round["expected"].get<uint64_t>(), uint64_t(rate * secs));
  EXPECT_EQ(round["unique"].get<uint64_t>(), uint64_t(rate * secs)) << round.dump();
  EXPECT_EQ(round["duplicates"].get<uint64_t>(), 0u);
  EXPECT_EQ(round["missing"].get<uint64_t>(), 0u);
  EXPECT_EQ(round["outside"].get<uint64_t>(), 0u);
  EXPECT_EQ(s["received"].get<uint64_t>(), uint64_t(rate * secs)) << "every tuple exactly once";
  EXPECT_EQ(s["malformed"].get<uint64_t>(), 0u);
}

}  // namespace

TEST(GenTestbed, TcpExactRateEveryIdOnce) { check_one_round("tcp"); }
TEST(GenTestbed, UdpExactRateEveryIdOnce) { check_one_round("udp"); }

// A sink that serves 4200 tuples/s at most; rounds at 1000, 2000, ... must
// sustain 4000 and fail at 5000 because the backlog grows.
TEST(GenTestbed, MaxrateFindsThrottledSinkWithinOneStep) {
  REQUIRE_TESTBED();
  Testbed tb("genmr", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const double throttle = 4200, step = 1000;
  auto sink = start_sink(tb, 7100, "--throttle 4200", tmp);
  auto r = run("ip netns exec " + tb.ns(1) + " " + cpt() +
                   " maxrate --json --to 10.77.2.2:7100 --from 1000 --step 1000 --duration 2 --max 10000",
               180);
  ASSERT_EQ(r.status, 0) << r.out;
  json m = parse_json(r.out, "maxrate");
  double best = m["max_sustainable_rate"];
  EXPECT_LE(best, throttle) << r.out;
  EXPECT_GT(best, throttle - step) << r.out;
  EXPECT_FALSE(m["reached_max"].get<bool>());
  const json& last = m["rounds"].back();
  EXPECT_FALSE(last["sustained"].get<bool>());
  EXPECT_NE(last["verdict"].get<std::string>().find("backlog grows"), std::string::npos) << last.dump();
  for (size_t i = 0; i + 1 < m["rounds"].size(); ++i) {
    EXPECT_TRUE(m["rounds"][i]["sustained"].get<bool>()) << m["rounds"][i].dump();
    EXPECT_EQ(m["rounds"][i]["sink"]["lost"].get<uint64_t>(), 0u);
  }
}

// Both ends recorded by one system-wide recorder on the cptrace executable: one
// event per tuple on each side, all ids, from the generator's and the sink's
// processes only (the recorder maps the same file but never logs).
TEST(GenTestbed, RecordedGeneratorAndSinkLogEveryTuple) {
  REQUIRE_TESTBED();
  REQUIRE_BPF();
  Testbed tb("genrec", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  testutil::Proc rec(testutil::record_cmd(tmp / "trace", "--lib " + cpt()), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(testutil::attached(rec, 20));
  auto sink = start_sink(tb, 7200, "--rounds 1", tmp);
  const uint64_t n = 20000;
  auto r = run("ip netns exec " + tb.ns(1) + " " + cpt() +
                   " gen --to 10.77.2.2:7200 --control 10.77.2.2:7201 --rate 10000 --duration 2",
               60);
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_EQ(sink->wait(30), 0);
  // Both ends have exited, so their events are in the rings; the recorder empties
  // them on the way out (after detaching), whatever its drain's polling period.
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(60), 0) << testutil::read_file(rec.err_path);

  cptrace::TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error());
  std::map<std::string, std::set<uint64_t>> ids;
  std::map<std::string, std::set<uint32_t>> pids;
  uint64_t events = 0;
  tr.for_each_event([&](const cptrace::TraceEvent& e) {
    if (e.kind != uint8_t(cptrace::EventKind::User)) return;
    std::string ch = tr.channel_name(e.channel);
    ids[ch].insert(e.tuple);
    pids[ch].insert(e.pid);
    events++;
  });
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  EXPECT_EQ(events, 2 * n) << "one event per tuple on each side, nothing else";
  ASSERT_EQ(ids["gen.emit"].size(), n);
  ASSERT_EQ(ids["sink.recv"].size(), n);
  EXPECT_EQ(*ids["gen.emit"].rbegin(), n - 1);
  EXPECT_EQ(*ids["sink.recv"].rbegin(), n - 1);
  EXPECT_EQ(pids["gen.emit"].size(), 1u);
  EXPECT_EQ(pids["sink.recv"].size(), 1u);
  EXPECT_EQ(pids["gen.emit"].count(uint32_t(rec.pid)) + pids["sink.recv"].count(uint32_t(rec.pid)), 0u)
      << "the recorder recorded itself";
}

TEST(GenCli, BadFlagsNameTheFlag) {
  testutil::TempDir tmp;
  auto r = testutil::run(cpt() + " gen --to 127.0.0.1:9 --rate 0 --duration 1", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--rate 0"), std::string::npos) << r.err;
  r = testutil::run(cpt() + " gen --to localhost --rate 10 --duration 1", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--to localhost"), std::string::npos) << r.err;
  r = testutil::run(cpt() + " gen --to 127.0.0.1:9 --rate 10 --duration 1 --udp --size 70000", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--size 70000"), std::string::npos) << r.err;
  r = testutil::run(cpt() + " maxrate --to 127.0.0.1:9 --from 100 --step 0 --duration 1", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--step 0"), std::string::npos) << r.err;
  r = testutil::run(cpt() + " overhead --cpus 1-x -- true", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cpus 1-x"), std::string::npos) << r.err;
}
