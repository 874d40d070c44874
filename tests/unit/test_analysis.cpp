// Throughput, service rates and same-node latency on synthetic traces whose
// answers are known exactly (1 GHz TSC: one tick = one ns), through the real
// command line where the output format matters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "latency/local_latency.h"
#include "analyze/service_rates.h"
#include "synthetic_trace.h"
#include "test_util.h"
#include "analyze/throughput.h"

using namespace cptrace;
using namespace testutil;
using nlohmann::json;

namespace {

constexpr uint64_t O = SyntheticTrace::kOrigin;
constexpr uint64_t MS = 1'000'000, US = 1'000;

// "in": events at known instants, including one before the trace start (a
// batch-path stamp) and silent stretches; "idle": announced, never logged.
SyntheticTrace throughput_trace() {
  SyntheticTrace t;
  t.channels = {{1, "in"}, {2, "out"}, {3, "idle"}};
  t.add(1, O - 3 * MS, 0);  // period -1 (10 ms periods)
  for (int i = 0; i < 7; ++i) t.add(1, O + 2 * MS + i, 1 + i);  // period 0: 7
  for (int i = 0; i < 3; ++i) t.add(1, O + 35 * MS + i * MS, 10 + i);  // period 3: 3
  t.add(2, O + 10 * MS, 20);  // period 1 exactly at its start
  t.add(2, O + 19 * MS + 999'999, 21);  // period 1, last tick
  t.add(2, O + 55 * MS, 22, 0, 100, 101, uint8_t(EventKind::ChannelClose));  // not a user event
  t.stop = O + 62 * MS;  // stop + 1000 ticks -> period 6 is the last
  return t;
}

json run_json(const std::string& cmd, const TempDir& tmp) {
  auto r = run(cmd, tmp);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.err;
  return json::parse(r.out);
}

}  // namespace

TEST(Throughput, KnownCountsEmptyPeriodsAndEarlyEvents) {
  TempDir tmp;
  throughput_trace().write(tmp / "t");
  json j = run_json(cptrace_bin() + " throughput " + (tmp / "t") + " --period 10 --json", tmp);
  EXPECT_EQ(j["first_period"], -1);
  EXPECT_EQ(j["periods"], 8);  // -1 .. 6
  EXPECT_EQ(j["period_ticks"], 10 * MS);
  std::map<std::string, std::vector<uint64_t>> got;
  for (auto& c : j["channels"]) got[c["name"]] = c["counts"].get<std::vector<uint64_t>>();
  EXPECT_EQ(got["in"], (std::vector<uint64_t>{1, 7, 0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(got["out"], (std::vector<uint64_t>{0, 0, 2, 0, 0, 0, 0, 0}));
  EXPECT_EQ(got["idle"], (std::vector<uint64_t>(8, 0)));

  // --channel restricts; CSV carries the same numbers.
  auto r = run(cptrace_bin() + " throughput " + (tmp / "t") + " --period 10 --channel in --csv", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "period,start_s,channel,events");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows[0], "-1,-0.010000000,in,1");
  EXPECT_EQ(rows[1], "0,0.000000000,in,7");
  EXPECT_EQ(rows[4], "3,0.030000000,in,3");
}

// Period indices at the ends of the signed range: no overflow, floor semantics.
TEST(Throughput, PeriodIndexAtTheEndsOfTheRange) {
  Timeline tl;
  tl.origin = 1000;
  const uint64_t half = uint64_t(1) << 63;
  EXPECT_EQ(period_index(tl, 1000 - half, 1), INT64_MIN);
  EXPECT_EQ(period_index(tl, 1000 + half - 1, 1), INT64_MAX);
  EXPECT_EQ(period_index(tl, 1000 - half, 3), -int64_t(half / 3 + 1));
  EXPECT_EQ(period_index(tl, 999, 10), -1);
  EXPECT_EQ(period_index(tl, 990, 10), -1);
  EXPECT_EQ(period_index(tl, 989, 10), -2);
  EXPECT_EQ(period_index(tl, 1009, 10), 0);
  EXPECT_EQ(periods_between(INT64_MIN, INT64_MAX), UINT64_MAX);  // saturates
  EXPECT_EQ(periods_between(-1, 1), 3u);
}

TEST(Throughput, BadInputIsAClearError) {
  TempDir tmp;
  throughput_trace().write(tmp / "t");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"throughput " + (tmp / "t") + " --channel nope", "unknown channel 'nope'"},
      {"throughput " + (tmp / "t") + " --period 0", "--period 0"},
      {"throughput " + (tmp / "t") + " --period -5", "--period -5"},
      {"throughput " + (tmp / "t") + " --period 1e-9", "shorter than one TSC tick"},
      {"throughput " + (tmp / "t") + " --period 0.000005", "periods (at most"},
      {"throughput " + (tmp / "t") + " --period abc", "--period"},
      {"throughput " + (tmp / "nowhere"), "no such file or directory"},
      {"throughput " + tmp.path.string(), "not a cptrace trace directory"},
      {"rates " + (tmp / "t") + " --channel-pair in", "expected FROM,TO"},
      {"rates " + (tmp / "t") + " --channel-pair in,nope", "unknown channel 'nope'"},
      {"rates " + (tmp / "t") + " --channel-pair in,out --quantile 2", "--quantile 2"},
  };
  for (const auto& c : cases) {
    auto r = run(cptrace_bin() + " " + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
  // The unknown-channel message lists the channels the trace has.
  auto r = run(cptrace_bin() + " throughput " + (tmp / "t") + " --channel nope", tmp);
  EXPECT_NE(r.err.find("idle, in, out"), std::string::npos) << r.err;
  // A file that is not a trace.
  { std::ofstream(tmp / "t/junk.cpt") << "this is not a trace at all"; }
  r = run(cptrace_bin() + " throughput " + (tmp / "t/junk.cpt"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("junk.cpt at byte 0"), std::string::npos) << r.err;
}

TEST(Throughput, TruncatedTraceCountsWhatIsLeftAndFails) {
  TempDir tmp;
  SyntheticTrace t = throughput_trace();
  t.per_frame = 4;  // several event frames, so a cut keeps some
  t.write(tmp / "t");
  std::string ev = tmp / "t/events.cpt";
  std::filesystem::resize_file(ev, std::filesystem::file_size(ev) - 30);  // into the counters frame
  TraceReader whole(tmp / "t");
  ASSERT_TRUE(whole.error());
  auto r = run(cptrace_bin() + " throughput " + (tmp / "t") + " --period 10 --json", tmp);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("at byte " + std::to_string(whole.error()->offset())), std::string::npos) << r.err;
  uint64_t total = 0;
  json j = json::parse(r.out);
  for (auto& c : j["channels"]) total += c["total"].get<uint64_t>();
  EXPECT_EQ(total, 13u) << r.out;  // every user event sits before the cut
}

// ---- service rates ------------------------------------------------------------------

namespace {

Timeline synth_timeline(uint64_t end) {
  Timeline tl;
  tl.origin = O;
  tl.end = end;
  tl.hz = 1e9;
  return tl;
}

// Bursts of `n` items arriving together every 40 ms, 2.5 ms into each 40 ms slot,
// served one after the other in `svc` ticks each.
void add_bursts(std::vector<QueueItem>& items, int first_burst, int bursts, int n, uint64_t svc) {
  for (int b = first_burst; b < first_burst + bursts; ++b) {
    uint64_t t0 = O + 2'500'000 + uint64_t(b) * 40 * MS;
    for (int i = 0; i < n; ++i) items.push_back({t0, t0 + uint64_t(i + 1) * svc});
  }
}

}  // namespace

TEST(ServiceRates, BurstyServerNonBlockingEqualsExact) {
  // 15 bursts of 200 items at 100 us each: busy [2.5, 22.5) ms of every 40 ms.
  // Exactly three 5 ms windows per burst never see an empty queue, each holding
  // 50 departures: 10000 items/s, and every item's service time is 100 us.
  std::vector<QueueItem> items;
  add_bursts(items, 0, 15, 200, 100 * US);
  RateOptions o;
  o.period_ms = 5;
  ServiceRate s = service_rate_of(items, synth_timeline(O + 600 * MS), 5 * MS, o);
  EXPECT_EQ(s.windows, 120u);
  EXPECT_EQ(s.nonblocking, 45u);
  EXPECT_EQ(s.status, "ok");
  ASSERT_TRUE(s.estimate);
  EXPECT_NEAR(*s.estimate, 10000.0, 1e-6);
  EXPECT_NEAR(s.raw_max, 10000.0, 1e-6);
  EXPECT_EQ(s.items, 3000u);
  EXPECT_NEAR(s.service_mean_s, 100e-6, 1e-15);
  EXPECT_NEAR(s.service_p95_s, 100e-6, 1e-15);
  ASSERT_TRUE(s.exact_rate);
  EXPECT_NEAR(*s.exact_rate, 10000.0, 1e-6);
  EXPECT_EQ(s.overtakes, 0u);
}

TEST(ServiceRates, StarvedServerGetsAStatusNotANumber) {
  // One item every 200 us, served in 100 us: the queue is empty half the time, so
  // no 5 ms window is non-blocking. The per-item estimate is still exact.
  std::vector<QueueItem> items;
  for (int i = 0; i < 3000; ++i) items.push_back({O + uint64_t(i) * 200 * US, O + uint64_t(i) * 200 * US + 100 * US});
  RateOptions o;
  o.period_ms = 5;
  ServiceRate s = service_rate_of(items, synth_timeline(O + 600 * MS), 5 * MS, o);
  EXPECT_EQ(s.nonblocking, 0u);
  EXPECT_EQ(s.status, "too few non-blocking windows");
  EXPECT_FALSE(s.estimate);
  ASSERT_TRUE(s.exact_rate);
  EXPECT_NEAR(*s.exact_rate, 10000.0, 1e-6);
}

TEST(ServiceRates, RateThatChangesIsNotConverged) {
  // 8 bursts at 100 us per item, then 7 at 50 us: the estimate over the first half
  // of the samples (10000/s) is far from the final one (20000/s).
  std::vector<QueueItem> items;
  add_bursts(items, 0, 8, 200, 100 * US);
  add_bursts(items, 8, 7, 400, 50 * US);
  RateOptions o;
  o.period_ms = 5;
  ServiceRate s = service_rate_of(items, synth_timeline(O + 600 * MS), 5 * MS, o);
  EXPECT_EQ(s.nonblocking, 45u);
  EXPECT_EQ(s.status, "not converged");
  EXPECT_FALSE(s.estimate);
  EXPECT_NEAR(s.drift, 0.5, 1e-9);
  // The same samples with a tolerance that accepts a 50% drift give the final estimate.
  o.tolerance = 0.6;
  s = service_rate_of(items, synth_timeline(O + 600 * MS), 5 * MS, o);
  EXPECT_EQ(s.status, "ok");
  ASSERT_TRUE(s.estimate);
  EXPECT_NEAR(*s.estimate, 20000.0, 1e-6);
}

TEST(ServiceRates, ItemsQueuedBeforeTheTraceKeepTheServerBusy) {
  // 100 dequeues whose enqueue was before the trace (no A event), one every 100 us
  // from the origin: the queue is non-empty until the last one, so the windows
  // covering [0, 10 ms) are non-blocking.
  std::vector<QueueItem> items;
  for (int i = 0; i < 100; ++i) items.push_back({std::nullopt, O + uint64_t(i + 1) * 100 * US});
  RateOptions o;
  o.period_ms = 1;
  o.min_windows = 5;
  ServiceRate s = service_rate_of(items, synth_timeline(O + 20 * MS), 1 * MS, o);
  EXPECT_EQ(s.windows, 20u);
  EXPECT_EQ(s.nonblocking, 10u);  // [0,1) .. [9,10): the last departure at exactly 10 ms
  ASSERT_TRUE(s.estimate);
  EXPECT_NEAR(*s.estimate, 10000.0, 1e-6);
  EXPECT_EQ(s.items, 0u);  // no arrival stamps: no exact per-item estimate
  EXPECT_FALSE(s.exact_rate);
}

TEST(ServiceRates, GaussianFilterPreservesLevelsAndSpreadsImpulses) {
  std::vector<double> flat(20, 7.0);
  for (double v : gaussian_filter(flat, 1.0)) EXPECT_NEAR(v, 7.0, 1e-12);
  std::vector<double> imp(21, 0.0);
  imp[10] = 1;
  auto y = gaussian_filter(imp, 1.0);
  double sum = 0;
  for (double v : y) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-12);  // away from the ends, weights sum to one
  EXPECT_NEAR(y[9], y[11], 1e-15);
  EXPECT_NEAR(y[9] / y[10], std::exp(-0.5), 1e-12);
  EXPECT_EQ(y[6], 0.0);  // radius 3 sigma
  EXPECT_EQ(gaussian_filter(imp, 0.0), imp);
}

TEST(ServiceRates, CommandLineOnRecordedPairs) {
  // The bursty server written as a trace: "enq" and "deq" events by tuple id,
  // with the file order scrambled per frame (as per-CPU rings leave it).
  SyntheticTrace t;
  t.channels = {{11, "enq"}, {12, "deq"}};
  std::vector<QueueItem> items;
  add_bursts(items, 0, 15, 200, 100 * US);
  for (size_t i = 0; i < items.size(); ++i) {
    t.add(11, *items[i].arrive, i, uint16_t(i % 2));
    t.add(12, *items[i].depart, i, uint16_t((i + 1) % 2));
  }
  for (size_t i = 0; i + 1 < t.events.size(); i += 2) std::swap(t.events[i], t.events[i + 1]);
  t.stop = O + 600 * MS - 1000;  // end = O + 600 ms
  TempDir tmp;
  t.write(tmp / "t");
  json j = run_json(cptrace_bin() + " rates " + (tmp / "t") + " --channel-pair enq,deq --period 5 --json", tmp);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["nonblocking"]["status"], "ok");
  EXPECT_EQ(j[0]["nonblocking"]["nonblocking_windows"], 45);
  EXPECT_NEAR(j[0]["nonblocking"]["estimate_per_s"].get<double>(), 10000.0, 1e-6);
  EXPECT_NEAR(j[0]["exact"]["rate_per_s"].get<double>(), 10000.0, 1e-6);
  EXPECT_EQ(j[0]["exact"]["items"], 3000);
  EXPECT_EQ(j[0]["unmatched_from"], 0);
  EXPECT_EQ(j[0]["unmatched_to"], 0);
  // Text output says the status, not a number, when there is none.
  auto r = run(cptrace_bin() + " rates " + (tmp / "t") + " --channel-pair enq,deq --period 5 --min-windows 46", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("too few non-blocking windows"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exact per item      10000.000 items/s"), std::string::npos) << r.out;
  // Two channels that never share a tuple id are not a queue: a status, no number.
  SyntheticTrace u;
  u.channels = {{1, "a"}, {2, "b"}};
  for (uint64_t i = 0; i < 1000; ++i) u.add(1 + i % 2, O + i * 100 * US, i);
  u.write(tmp / "u");
  j = run_json(cptrace_bin() + " rates " + (tmp / "u") + " --channel-pair a,b --period 1 --json", tmp);
  EXPECT_EQ(j[0]["nonblocking"]["status"], "no tuple id on both channels");
  EXPECT_TRUE(j[0]["nonblocking"]["estimate_per_s"].is_null());
  EXPECT_TRUE(j[0]["exact"]["rate_per_s"].is_null());
}

// ---- same-node latency --------------------------------------------------------------------

namespace {

// Tuple i: "in" at i ms, "out" (100 + 10 * (i % 10)) us later, so each of the
// durations 100, 110, ..., 190 us occurs 100 times. Plus 5 tuples only on "in",
// 3 only on "out", and 2 repeated "in" stamps (later than the first: ignored).
SyntheticTrace latency_trace() {
  SyntheticTrace t;
  t.channels = {{1, "in"}, {2, "out"}};
  for (uint64_t i = 0; i < 1000; ++i) {
    t.add(1, O + i * MS, i);
    t.add(2, O + i * MS + (100 + 10 * (i % 10)) * US, i, 1);
  }
  for (uint64_t i = 0; i < 5; ++i) t.add(1, O + (2000 + i) * MS, 5000 + i);
  for (uint64_t i = 0; i < 3; ++i) t.add(2, O + (2100 + i) * MS, 6000 + i);
  t.add(1, O + 3000 * MS, 7);
  t.add(1, O + 3001 * MS, 8);
  t.clock_width = 60;
  return t;
}

}  // namespace

TEST(LocalLatency, KnownDurationsAndBounds) {
  TempDir tmp;
  latency_trace().write(tmp / "t");
  TraceReader r(tmp / "t");
  Timeline tl = trace_timeline(r);
  EXPECT_EQ(tl.hz, 1e9);
  LatencySeries s = same_node_latency(r, tl, 1, 2);
  EXPECT_FALSE(s.remote);
  EXPECT_EQ(s.from_channel, "in");
  EXPECT_EQ(s.summary.count, 1000u);
  EXPECT_EQ(s.unmatched_from, 5u);
  EXPECT_EQ(s.unmatched_to, 3u);
  EXPECT_EQ(s.duplicates, 2u);
  // Every bound is value +- the widest correlation bracket (60 ns); the tuples
  // come 1 ms apart over 1 s, so every time slice holds some.
  ASSERT_EQ(s.width_over_time.size(), 200u);
  for (const auto& p : s.width_over_time) ASSERT_NEAR(p[1].get<double>(), 120e-9, 1e-15);
  EXPECT_NEAR(s.width_over_time[0][0].get<double>(), 0, 1e-12);
  uint64_t binned = 0;
  for (uint64_t c : s.histogram["counts"]) binned += c;
  EXPECT_EQ(binned, 1000u);
  EXPECT_EQ(s.cdf.back()[1].get<double>(), 1.0);
  EXPECT_NEAR(s.cdf.back()[0].get<double>(), 190e-6, 1e-15);
  const LatencySummary& m = s.summary;
  EXPECT_NEAR(m.min, 100e-6, 1e-15);
  EXPECT_NEAR(m.p25, 120e-6, 1e-15);
  EXPECT_NEAR(m.p50, 140e-6, 1e-15);
  EXPECT_NEAR(m.p90, 180e-6, 1e-15);
  EXPECT_NEAR(m.p99, 190e-6, 1e-15);
  EXPECT_NEAR(m.max, 190e-6, 1e-15);
  EXPECT_NEAR(m.mean, 145e-6, 1e-15);
  EXPECT_NEAR(m.width_max, 120e-9, 1e-15);
}

// `cptrace latency` on one node's trace: the same pairing as same_node_latency
// (counts of unmatched and repeated ids included), the rows in the shape of a
// translated run's, and within a small budget the same rows, spilled.
TEST(LocalLatency, NodeRowsMatchTheSeriesAndSpillWithinBudget) {
  TempDir tmp;
  latency_trace().write(tmp / "t");
  TraceReader r(tmp / "t");
  MemoryBudget big;
  big.temp_dir = tmp.path.string();
  LatencyResult res = node_latency_stream(r, "in", "out", big);
  EXPECT_EQ(res.row_count, 1000u);
  EXPECT_EQ(res.from_only, 5u);
  EXPECT_EQ(res.to_only, 3u);
  EXPECT_EQ(res.from_duplicates + res.to_duplicates, 2u);
  EXPECT_EQ(res.partitions, 1u);
  ASSERT_EQ(res.node_names, std::vector<std::string>{"synth"});
  ASSERT_TRUE(res.have_ns);
  std::vector<std::pair<uint64_t, int64_t>> rows;
  res.for_each_row([&](const LatencyRow& row) {
    EXPECT_EQ(row.from_node, 0);
    EXPECT_EQ(row.to_node, 0);
    EXPECT_STREQ(row.scenario, "same-node");
    EXPECT_EQ(row.ticks_lo, row.ticks - 60);  // the widest correlation bracket
    EXPECT_EQ(row.ticks_hi, row.ticks + 60);
    EXPECT_EQ(row.ns, row.ticks);  // exactly 1 GHz
    EXPECT_EQ(row.ns_lo, row.ticks - 61);
    EXPECT_EQ(row.ns_hi, row.ticks + 61);
    rows.push_back({row.tuple, row.ticks});
  });
  ASSERT_EQ(rows.size(), 1000u);

  MemoryBudget small;
  small.bytes = 16 << 10;
  small.temp_dir = tmp.path.string();
  LatencyResult spilled = node_latency_stream(r, "in", "out", small);
  EXPECT_GT(spilled.partitions, 1u);
  std::vector<std::pair<uint64_t, int64_t>> again;
  spilled.for_each_row([&](const LatencyRow& row) { again.push_back({row.tuple, row.ticks}); });
  EXPECT_EQ(again, rows);
  EXPECT_EQ(spilled.from_only, 5u);
  EXPECT_EQ(spilled.to_only, 3u);
}
