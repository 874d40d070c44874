// Channel handlers on the real kernel: each handler's exact semantics on both
// paths, a switch id -> downsample 10 -> null mid-run through the control
// socket, and bad configurations refused with the configuration unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "record/control_socket.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;
using nlohmann::json;

namespace {

struct Recorded {
  std::map<std::string, std::vector<TraceEvent>> user;  // channel name -> user events, by tuple
  std::map<std::string, std::vector<TraceEvent>> count;  // channel name -> Count events
};

Recorded by_channel(const TraceReader& r) {
  Recorded out;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User)) out.user[r.channel_name(e.channel)].push_back(e);
    if (e.kind == uint8_t(EventKind::Count)) out.count[r.channel_name(e.channel)].push_back(e);
  });
  for (auto& [n, v] : out.user) std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.tuple < b.tuple; });
  return out;
}

std::vector<uint64_t> tuples(const std::vector<TraceEvent>& v) {
  std::vector<uint64_t> t;
  for (auto& e : v) t.push_back(e.tuple);
  return t;
}

// recorded + dropped + filtered == seen, in the counters and as `cptrace info` says.
void expect_accounted(const TraceReader& r, const TempDir& tmp, const std::string& dir) {
  uint64_t recorded = 0;
  r.for_each_event([&](const TraceEvent& e) { recorded += e.kind != uint8_t(EventKind::Count); });
  const Counters& c = r.counters();
  EXPECT_EQ(c.total_dropped(), 0u);
  EXPECT_EQ(recorded + c.total_dropped() + c.total_filtered(), c.total_seen());
  auto info = run(cptrace_bin() + " info --json " + dir, tmp);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_TRUE(json::parse(info.out).at("accounted").get<bool>()) << info.out;
}

const json* change_for(const TraceReader& r, const std::string& name, size_t nth = 0) {
  for (const json& c : r.handler_changes())
    if (c.at("name") == name && nth-- == 0) return &c;
  return nullptr;
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_TRUE(f);
  fputs(text.c_str(), f);
  fclose(f);
}

// One thread logs tuple i on every channel in turn, paced, so the id channel's
// timestamps are the truth for the counter channel (logged right after it).
// "single" means cp_logTS at its probe site here: handlers meet each event at
// its call there (the thread buffer, cp_logTS's default, is the batch path's).
std::string site_env(const std::string& mode) { return mode == "single" ? "env CPTRACE_SINGLE=site " : ""; }

void check_semantics(const std::string& mode) {
  TempDir tmp;
  const uint64_t N = 20000;
  write_file(tmp / "cfg",
             "# handlers under test\n"
             "chan1 downsample 7\n"
             "chan2 xoy 3 10\n"
             "chan3 firstlast\n"
             "chan4 null\n"
             "chan5 counter 5ms\n"
             "*     id   # chan0\n");
  auto res =
      run(record_cmd(tmp / "trace", "--ring-mb 64 --config " + (tmp / "cfg")) + " -- " + site_env(mode) + workload() +
              " --threads 1 --channels 6 --all-channels --events " + std::to_string(N) + " --pace-us 20 --mode " + mode,
          tmp);
  ASSERT_EQ(res.status, 0) << res.err;
  TraceReader r(tmp / "trace");
  ASSERT_FALSE(r.error());
  Recorded rec = by_channel(r);

  std::vector<uint64_t> all, ds, xoy;
  for (uint64_t i = 0; i < N; ++i) {
    all.push_back(i);
    if (i % 7 == 0) ds.push_back(i);
    if (i % 10 < 3) xoy.push_back(i);
  }
  EXPECT_EQ(tuples(rec.user["chan0"]), all) << "id keeps every event";
  EXPECT_EQ(tuples(rec.user["chan1"]), ds) << "downsample 7 keeps the 1st, 8th, 15th ...";
  EXPECT_EQ(tuples(rec.user["chan2"]), xoy) << "xoy 3 10 keeps tuple % 10 < 3";
  EXPECT_EQ(tuples(rec.user["chan3"]), (std::vector<uint64_t>{0, N - 1})) << "firstlast";
  EXPECT_TRUE(rec.user["chan4"].empty()) << "null";
  EXPECT_TRUE(rec.user["chan5"].empty()) << "counter keeps no per-event record";

  // counter: the series adds up to every event, and each period holds the
  // events the id channel saw in it, within one event at each edge.
  // Both paths stamp in TSC (the single path at its probe site's call), so the
  // periods are TSC periods of period_ticks (5 ms) on both.
  const json* cc = change_for(r, "chan5");
  ASSERT_TRUE(cc);
  uint64_t period_ticks = cc->at("period_ticks");
  ASSERT_GT(period_ticks, 0u);
  auto bucket = [&](uint64_t tsc) -> uint64_t { return tsc / period_ticks; };
  std::map<uint64_t, int64_t> counted, truth;
  uint64_t total = 0, not_tsc = 0;
  for (auto& e : rec.count["chan5"]) {
    counted[bucket(e.ts)] += int64_t(e.tuple);  // per CPU: summed per period
    total += e.tuple;
    not_tsc += !is_tsc(e.timebase);
  }
  EXPECT_EQ(not_tsc, 0u) << "counter periods of TSC-stamped events are TSC periods";
  for (auto& e : rec.user["chan0"]) truth[bucket(e.ts)]++;
  EXPECT_EQ(total, N);
  EXPECT_GE(counted.size(), 10u) << "the run should span many periods";
  std::set<uint64_t> keys;
  for (auto& [b, n] : counted) keys.insert(b);
  for (auto& [b, n] : truth) keys.insert(b);
  int off_by_one = 0;
  for (uint64_t b : keys) {
    int64_t d = counted[b] - truth[b];
    EXPECT_LE(std::abs(d), 1) << "period " << b << ": counted " << counted[b] << ", truth " << truth[b];
    off_by_one += d != 0;
  }
  ::testing::Test::RecordProperty("periods", int(keys.size()));
  ::testing::Test::RecordProperty("periods_off_by_one", off_by_one);
  printf("counter (%s): %zu periods, %d off by one event at an edge\n", mode.c_str(), keys.size(), off_by_one);
  expect_accounted(r, tmp, tmp / "trace");
}

}  // namespace

TEST(Handlers, ExactSemanticsSinglePath) {
  REQUIRE_BPF();
  check_semantics("single");
}

TEST(Handlers, ExactSemanticsBatchPath) {
  REQUIRE_BPF();
  check_semantics("batch");
}

// Several threads: downsample counts in one global order, so exactly
// ceil(total / N) events survive; xoy keeps exactly its tuple set.
TEST(Handlers, DownsampleIsGlobalAcrossThreads) {
  REQUIRE_BPF();
  TempDir tmp;
  write_file(tmp / "cfg", "chan0 downsample 10\nchan1 xoy 1 4\n");
  auto res = run(record_cmd(tmp / "trace", "--config " + (tmp / "cfg")) + " -- " + site_env("single") + workload() +
                     " --threads 4 --channels 2 --all-channels --events 25001 --mode single",
                 tmp);
  ASSERT_EQ(res.status, 0) << res.err;
  TraceReader r(tmp / "trace");
  Recorded rec = by_channel(r);
  EXPECT_EQ(rec.user["chan0"].size(), (4u * 25001 + 9) / 10);
  uint64_t xoy = 0;
  for (auto& e : rec.user["chan1"]) EXPECT_LT(e.tuple % 4, 1u);
  for (uint64_t t = 0; t < 4; ++t)
    for (uint64_t i = 0; i < 25001; ++i) xoy += (t * 1000000000ull + i) % 4 < 1;
  EXPECT_EQ(rec.user["chan1"].size(), xoy);
  expect_accounted(r, tmp, tmp / "trace");
}

// id -> downsample 10 -> null on chan0 while recording; chan1 stays `id` and
// tells when each tuple was emitted (chan0's event i lies between chan1's i-1 and i).
// At the site (CPTRACE_SINGLE=site) each event meets the rule in force at its
// call; a buffered one meets the rule in force when its buffer is handed over.
namespace {

// Records N paced single events of the workload (channels chan0, chan1, each
// call at once through the site) into tmp/trace with `record_args`, and every
// 0.8 s sets one rule of `sets` through `cptrace config`; waits for the end.
void record_switching(const TempDir& tmp, uint64_t N, const std::string& record_args,
                      const std::vector<std::string>& sets) {
  const std::string dir = tmp / "trace";
  Proc rec(record_cmd(dir, record_args) + " -- env CPTRACE_SINGLE=site " + workload() +
               " --threads 1 --channels 2 --all-channels --pace-us 100 --mode single --events " + std::to_string(N),
           tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  for (const std::string& rule : sets) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    auto set = run(cptrace_bin() + " config " + dir + " set " + rule, tmp);
    ASSERT_EQ(set.status, 0) << rule << ": " << set.err;
  }
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "r.err");
}

}  // namespace

TEST(Handlers, SwitchMidRunFollowsRecordedInstants) {
  REQUIRE_BPF();
  TempDir tmp;
  const uint64_t N = 30000;
  std::string dir = tmp / "trace";
  record_switching(tmp, N, "", {"chan0 downsample 10", "chan0 null"});
  if (HasFatalFailure()) return;

  TraceReader r(dir);
  ASSERT_FALSE(r.error());
  const json* c1 = change_for(r, "chan0", 0);
  const json* c2 = change_for(r, "chan0", 1);
  ASSERT_TRUE(c1 && c2) << r.handler_changes().dump();
  EXPECT_EQ(c1->at("spec"), "downsample 10");
  EXPECT_EQ(c2->at("spec"), "null");
  uint64_t b1 = c1->at("before").at("mono_ns"), a1 = c1->at("after").at("mono_ns");
  uint64_t b2 = c2->at("before").at("mono_ns"), a2 = c2->at("after").at("mono_ns");

  Recorded evs = by_channel(r);
  auto mono = [&](const TraceEvent& e) { return r.clock_map().tsc_to_mono(e.ts); };
  ASSERT_EQ(evs.user["chan1"].size(), N) << "the reference channel keeps every event";
  std::vector<uint64_t> t1(N);  // chan1's instant of tuple i
  for (auto& e : evs.user["chan1"]) t1[e.tuple] = mono(e);
  std::set<uint64_t> kept;
  for (auto& e : evs.user["chan0"]) {
    kept.insert(e.tuple);
    // Every recorded chan0 event lies in its emission slot.
    EXPECT_LT(mono(e), t1[e.tuple]);
    if (e.tuple) {
      EXPECT_GT(mono(e), t1[e.tuple - 1]);
    }
    EXPECT_LE(mono(e), a2) << "an event recorded after the switch to null";
  }
  // Before the first switch: every event.
  uint64_t phase_a = 0;
  for (uint64_t i = 0; i < N && t1[i] < b1; ++i, ++phase_a) EXPECT_TRUE(kept.count(i)) << "tuple " << i;
  // Between the switches: every 10th, from the first event the new handler saw.
  // BPF switches at some instant in [b1, a1], so events stamped after b1 may still
  // be the id handler's (all kept). The downsample's first event s is the first
  // kept tuple (from the first one stamped >= b1) whose successor was dropped; it
  // must lie within the window the test knows of (at most the first tuple emitted
  // after a1), and from s on the pattern is exact.
  uint64_t first_b = UINT64_MAX, after_first = UINT64_MAX;
  for (auto& e : evs.user["chan0"])
    if (mono(e) >= b1) {
      first_b = std::min(first_b, e.tuple);
    }
  for (uint64_t i = 1; i < N; ++i)
    if (t1[i - 1] > a1) {
      after_first = i;
      break;
    }
  ASSERT_NE(first_b, UINT64_MAX) << "nothing recorded after the first switch";
  uint64_t s = first_b;
  while (s + 1 < N && kept.count(s + 1)) ++s;
  EXPECT_LE(s, after_first) << "the downsample's 1st event is at latest the first one emitted after the switch";
  uint64_t phase_b = 0, kept_b = 0;
  for (uint64_t i = s; i < N; ++i) {
    if (t1[i] >= b2) break;
    phase_b++;
    bool want = (i - s) % 10 == 0;
    kept_b += want;
    EXPECT_EQ(kept.count(i) == 1, want) << "tuple " << i;
  }
  // After the second switch: nothing (checked per event above); and it happened mid-run.
  uint64_t phase_c = 0;
  for (uint64_t i = 1; i < N; ++i) phase_c += t1[i - 1] > a2;
  EXPECT_GT(phase_a, 1000u);
  EXPECT_GT(phase_b, 1000u);
  EXPECT_GT(phase_c, 1000u);
  RecordProperty("phase_id_events", int(phase_a));
  RecordProperty("phase_downsample_events", int(phase_b));
  RecordProperty("phase_null_events", int(phase_c));
  RecordProperty("switch_window_ns", int(a1 - b1));
  printf("switch: %llu id, %llu downsample, %llu null events; windows %llu / %llu ns\n", (unsigned long long)phase_a,
         (unsigned long long)phase_b, (unsigned long long)phase_c, (unsigned long long)(a1 - b1),
         (unsigned long long)(a2 - b2));
  expect_accounted(r, tmp, dir);
  // info and dump show the history.
  auto info = run(cptrace_bin() + " info " + dir, tmp);
  EXPECT_NE(info.out.find("downsample 10"), std::string::npos) << info.out;
  auto dump = run(cptrace_bin() + " dump " + dir + " | head -3", tmp);
  EXPECT_NE(dump.out.find("# chan0"), std::string::npos) << dump.out;
}

// A counter replaced mid-run leaves its last period held in BPF state until the
// stop, under a generation no longer installed: the stop turns it into a count
// with that generation's own period, and nothing is lost.
TEST(Handlers, CounterReplacedMidRunKeepsItsHeldPeriod) {
  REQUIRE_BPF();
  TempDir tmp;
  const uint64_t N = 30000;
  std::string dir = tmp / "trace";
  write_file(tmp / "cfg", "chan0 counter 1s\n");
  record_switching(tmp, N, "--config " + (tmp / "cfg"), {"chan0 counter 7ms"});
  if (HasFatalFailure()) return;

  TraceReader r(dir);
  ASSERT_FALSE(r.error());
  const json* c1 = change_for(r, "chan0", 0);
  const json* c2 = change_for(r, "chan0", 1);
  ASSERT_TRUE(c1 && c2) << r.handler_changes().dump();
  uint64_t p1 = c1->at("period_ticks"), p2 = c2->at("period_ticks");
  ASSERT_GT(p1, 100 * p2);
  uint64_t b1 = c2->at("before").at("tsc"), a1 = c2->at("after").at("tsc");
  Recorded evs = by_channel(r);
  ASSERT_EQ(evs.user["chan1"].size(), N);
  // chan1's tuple i is logged right after chan0's: the switch splits chan0's
  // events between the two rules within the update's window [b1, a1].
  uint64_t before = 0, by_after = 0;
  for (auto& e : evs.user["chan1"]) {
    before += e.ts < b1;
    by_after += e.ts <= a1;
  }
  uint64_t first = evs.user["chan1"].front().ts, last = evs.user["chan1"].back().ts;
  uint64_t old_rule = 0, new_rule = 0, total = 0;
  for (auto& e : evs.count["chan0"]) {
    total += e.tuple;
    EXPECT_GE(e.ts + p1, first) << "a period starting before the run";
    EXPECT_LE(e.ts, last) << "a period starting after the run";
    if (e.ts < b1 && e.ts % p1 == 0)
      old_rule += e.tuple;
    else {
      EXPECT_EQ(e.ts % p2, 0u) << "a count of neither rule's period at " << e.ts;
      new_rule += e.tuple;
    }
  }
  EXPECT_EQ(total, N);
  EXPECT_GE(old_rule, before > 0 ? before - 1 : 0) << "the old rule's held period at the stop";
  EXPECT_LE(old_rule, by_after + 1);
  EXPECT_GT(new_rule, N / 2);
  printf("counter switch: %llu events under 1 s periods, %llu under 7 ms\n", (unsigned long long)old_rule,
         (unsigned long long)new_rule);
  expect_accounted(r, tmp, dir);
}

TEST(Handlers, BadConfigFileIsAClearError) {
  TempDir tmp;
  struct Case {
    std::string text, needle;
  } cases[] = {
      {"chan0 id\nchan1 bogus\n", "cfg:2: unknown handler `bogus`"},
      {"chan0 downsample 0\n", "cfg:1: downsample N: must be >= 1"},
      {"chan0 downsample x\n", "cfg:1: downsample N: `x` is not a non-negative integer"},
      {"\n\nchan0 xoy 5 3\n", "cfg:3: xoy X Y: X (5) must be <= Y (3)"},
      {"chan0 counter 10\n", "cfg:1: counter PERIOD: `10` is not a period"},
      {"chan0 null 3\n", "cfg:1: handler `null` takes 0 parameter(s)"},
      {"chan0\n", "cfg:1: missing handler"},
  };
  for (auto& c : cases) {
    write_file(tmp / "cfg", c.text);
    auto r = run(record_cmd(tmp / "t", "--config " + (tmp / "cfg")) + " -- " + workload(), tmp);
    EXPECT_NE(r.status, 0) << c.text;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "want `" << c.needle << "` in: " << r.err;
    EXPECT_EQ(r.out.find("\"pid\""), std::string::npos) << "the workload ran despite the bad config";
  }
  auto r = run(record_cmd(tmp / "t", "--config " + (tmp / "missing")) + " -- " + workload(), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("missing: No such file"), std::string::npos) << r.err;
}

// Refused changes (unknown channel, unknown handler, bad parameters, sent both
// through the command and straight to the socket) leave the configuration as
// it was: `get` says so, the history has no entry, and the events follow the
// original handler for the whole run.
TEST(Handlers, BadRuntimeChangeLeavesConfigurationUnchanged) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string dir = tmp / "trace";
  write_file(tmp / "cfg", "chan0 xoy 1 2\n");
  Proc rec(record_cmd(dir, "--config " + (tmp / "cfg")) + " -- " + workload() +
               " --threads 1 --channels 2 --all-channels --pace-us 100 --mode single --events 15000",
           tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"set nosuch id", "unknown channel `nosuch`"},
      {"set nosuch* id", "matches no known channel"},
      {"set chan0 frobnicate", "unknown handler `frobnicate`"},
      {"set chan0 downsample 0", "downsample N: must be >= 1"},
      {"set chan0 xoy 1", "handler `xoy` takes 2 parameter(s)"},
      {"set chan0", "usage: set CHANNEL HANDLER"},
  };
  for (auto& c : cases) {
    auto r = run(cptrace_bin() + " config " + dir + " " + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
  }
  // The recorder's own check, without the client's.
  json reply =
      control_request(dir + "/control.sock", {{"cmd", "set"}, {"channel", "chan0"}, {"handler", {"counter", "1"}}});
  EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
  EXPECT_NE(reply.value("error", "").find("counter PERIOD"), std::string::npos) << reply.dump();
  auto get = run(cptrace_bin() + " config " + dir + " get", tmp);
  EXPECT_EQ(get.status, 0) << get.err;
  EXPECT_NE(get.out.find("chan0"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("xoy 1 2"), std::string::npos) << get.out;
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "r.err");

  TraceReader r(dir);
  EXPECT_EQ(r.handler_changes().size(), 1u) << r.handler_changes().dump();
  Recorded evs = by_channel(r);
  EXPECT_EQ(evs.user["chan0"].size(), 7500u);
  for (auto& e : evs.user["chan0"]) EXPECT_EQ(e.tuple % 2, 0u);
  EXPECT_EQ(evs.user["chan1"].size(), 15000u);
  // No recorder: a clear error naming the socket.
  auto none = run(cptrace_bin() + " config " + (tmp / "nothere") + " set chan0 id", tmp);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("cannot reach a recorder"), std::string::npos) << none.err;
}

// A glob rule reaches a channel when the recorder learns its name from the live
// announcement: from the recorded install instant on, the channel follows it
// exactly; before it, the default. An exact rule earlier in the file wins.
TEST(Handlers, GlobRuleAppliesFromTheAnnouncement) {
  REQUIRE_BPF();
  TempDir tmp;
  const uint64_t N = 5000;
  write_file(tmp / "cfg", "chan1 id\nchan* downsample 2\n");
  auto res = run(record_cmd(tmp / "trace", "--config " + (tmp / "cfg")) + " -- " + workload() +
                     " --threads 1 --channels 2 --all-channels --pace-us 100 " +
                     "--delay-open-ms 300 --mode single --events " + std::to_string(N),
                 tmp);
  ASSERT_EQ(res.status, 0) << res.err;
  TraceReader r(tmp / "trace");
  const json* c0 = change_for(r, "chan0");
  ASSERT_TRUE(c0) << r.handler_changes().dump();
  EXPECT_EQ(c0->at("source"), "pattern");
  EXPECT_EQ(c0->at("rule"), "chan*");
  const json* c1 = change_for(r, "chan1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->at("source"), "config");
  uint64_t after = c0->at("after").at("mono_ns");
  Recorded evs = by_channel(r);
  EXPECT_EQ(evs.user["chan1"].size(), N);
  std::vector<uint64_t> later;
  for (auto& e : evs.user["chan0"])
    if (r.clock_map().tsc_to_mono(e.ts) > after) later.push_back(e.tuple);
  ASSERT_GT(later.size(), 100u);
  for (size_t k = 1; k < later.size(); ++k) EXPECT_EQ(later[k] - later[k - 1], 2u) << "at " << later[k];
  printf("glob: chan0's pattern installed (switch window %llu ns), %zu of its events before that\n",
         (unsigned long long)(after - c0->at("before").at("mono_ns").get<uint64_t>()),
         evs.user["chan0"].size() - later.size());
  expect_accounted(r, tmp, tmp / "trace");
}

// Batch path, one channel: every entry of a batch shares the handler looked up
// once, and downsample still counts every entry in one global order.
TEST(Handlers, BatchRunsOfOneChannelDownsampleExactly) {
  REQUIRE_BPF();
  TempDir tmp;
  write_file(tmp / "cfg", "chan0 downsample 10\n");
  auto res = run(record_cmd(tmp / "trace", "--ring-mb 64 --config " + (tmp / "cfg")) + " -- " + workload() +
                     " --threads 4 --channels 1 --events 25001 --mode batch",
                 tmp);
  ASSERT_EQ(res.status, 0) << res.err;
  TraceReader r(tmp / "trace");
  Recorded rec = by_channel(r);
  EXPECT_EQ(rec.user["chan0"].size(), (4u * 25001 + 9) / 10);
  expect_accounted(r, tmp, tmp / "trace");
}

// A traced program names its channels and itself with bytes that are not UTF-8:
// the recorder records every event, writes every name as text (\xNN for such a
// byte), and answers the control socket about those channels. It used to stop
// with "[json.exception.type_error.316] invalid UTF-8 byte" and lose the names.
TEST(Handlers, ChannelNamesThatAreNotUtf8AreRecordedAsText) {
  REQUIRE_BPF();
  TempDir tmp;
  const std::string dir = tmp / "trace", prog = (build_dir() / "tests" / "odd_names").string();
  const uint64_t n = 15000;
  Proc rec(record_cmd(dir) + " -- " + prog + " " + std::to_string(n) + " 100", tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  json reply = control_request(dir + "/control.sock", {{"cmd", "set"}, {"channel", "bad*"}, {"handler", {"null"}}});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_NE(reply.dump().find("bad\\\\xff\\\\xfename"), std::string::npos) << reply.dump();
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "r.err");

  TraceReader r(dir);
  ASSERT_FALSE(r.error()) << r.error()->what();
  Recorded evs = by_channel(r);
  EXPECT_EQ(evs.user["good"].size(), n);
  EXPECT_EQ(evs.user["tab\there\\xc3"].size(), n);
  EXPECT_GT(evs.user["bad\\xff\\xfename"].size(), 0u);  // until the null handler took effect
  EXPECT_LT(evs.user["bad\\xff\\xfename"].size(), n);
  expect_accounted(r, tmp, dir);
  auto info = run(cptrace_bin() + " info " + dir, tmp);
  EXPECT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("bad\\xff\\xfename"), std::string::npos) << info.out;
}
