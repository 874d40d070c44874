// LiveView: while the TSC frequency is still being estimated, counts near a
// period boundary are held back, so the final table equals throughput's even
// though throughput's period length is only known at stop.
#include <gtest/gtest.h>

#include "analyze/live_view.h"
#include "test_util.h"
#include "trace/block_codec.h"
#include "trace/trace_writer.h"

using namespace cptrace;
using namespace testutil;
using nlohmann::json;

namespace {

constexpr uint64_t kO = 1'000'000'000'000ull, kM0 = 5'000'000'000ull;

// 5 s at a nominal 1 GHz TSC, one event per channel every 10 us, a correlation
// point every 0.5 s; the first half second runs at 1 + early_ppm. The view is
// updated after every frame, as top does after each poll.
struct Watched {
  LiveView view{1000, {}};
  bool recounted = false;
  Throughput final_table, offline;
  json last;
};

void record_and_watch(const std::string& dir, double early_ppm, Watched& wv) {
  json meta = {{"format", "cptrace"}, {"start", {{"tsc", kO}, {"mono_ns", kM0}}}, {"complete", false}};
  TraceWriter w(dir, meta, true);
  TraceTail tail(dir + "/events.cpt");
  auto step = [&] {
    tail.poll([&](const std::vector<TraceEvent>& evs) { wv.view.add(evs); });
    wv.view.update(tail, meta);
  };
  std::vector<ClockPoint> pts;
  uint64_t early = uint64_t(500'000'000 * early_ppm * 1e-6);
  for (int k = 0; k <= 10; ++k)
    pts.push_back({kO + uint64_t(k) * 500'000'000 + (k ? early : 0), kM0 + uint64_t(k) * 500'000'000, 40, 0});
  w.write(encode_clock({pts[0], pts[1]}));
  w.write(encode_json(FrameType::Channels, R"([{"id":1,"name":"a","pid":1},{"id":2,"name":"b","pid":1}])", 2));
  step();
  for (int k = 1; k <= 10; ++k) {
    std::vector<TraceEvent> evs;
    for (uint64_t t = pts[k - 1].tsc; t < pts[k].tsc; t += 10'000)
      for (uint64_t ch : {1, 2}) evs.push_back({t + ch, ch, t, 1, 1, 0, uint8_t(EventKind::User), 0});
    for (size_t i = 0; i < evs.size(); i += 50'000)
      w.write(encode_events(evs.data() + i, std::min<size_t>(50'000, evs.size() - i)));
    if (k >= 2) w.write(encode_clock({pts[k]}));
    step();
  }
  meta["stop"] = {{"tsc", pts.back().tsc}};
  meta["tsc_hz"] = ClockMap(pts).tsc_hz();
  meta["complete"] = true;
  w.finish(meta);
  step();
  wv.last = wv.view.snapshot(tail);
  wv.final_table = wv.view.final_table(tail, meta, wv.recounted);
  TraceReader r(dir);
  Timeline tl = trace_timeline(r);
  wv.offline = compute_throughput(r, tl, period_ticks(tl, 1000, "--period"), 1000);
}

void expect_same(const Throughput& a, const Throughput& b) {
  EXPECT_EQ(a.period, b.period);
  EXPECT_EQ(a.first, b.first);
  ASSERT_EQ(a.channels.size(), b.channels.size());
  for (size_t i = 0; i < a.channels.size(); ++i) EXPECT_EQ(a.channels[i].counts, b.channels[i].counts) << i;
}

TEST(LiveView, FrequencyEstimateWithinBandFinalTableIsThroughputs) {
  TempDir tmp;
  Watched wv;
  record_and_watch(tmp / "t", 4, wv);  // 4 ppm early: inside the 10 ppm band
  EXPECT_FALSE(wv.recounted);
  EXPECT_GT(wv.last["boundary_events"].get<uint64_t>(), 0u) << "no event near a boundary: the test proves nothing";
  expect_same(wv.final_table, wv.offline);
  EXPECT_EQ(wv.final_table.channels[0].total, 500'001u);  // one more in the stretched first half second
}

TEST(LiveView, FrequencyEstimateOutsideBandIsRecounted) {
  TempDir tmp;
  Watched wv;
  record_and_watch(tmp / "t", 300, wv);  // far outside the band: recounted from the file
  EXPECT_TRUE(wv.recounted);
  expect_same(wv.final_table, wv.offline);
}

// top's live pairing takes a TSC stamp's error from the skew meta.json holds:
// a pair of one CPU is exact; CPU 0 -> CPU 1 carries CPU 1's interval alone
// (300 ticks each way), from the start's measure while only it is written (the
// stop's is null) and from both once both are: never the 0 of a skew it was
// not given, nor the widest on both stamps.
TEST(LiveView, PairsAcrossCpusCarryTheSkewMetaJsonHolds) {
  TempDir tmp;
  const std::string dir = tmp / "t";
  auto measure = [](int64_t lo, int64_t hi) {
    return json{{"reference_cpu", 0}, {"cpus", {{{"cpu", 1}, {"lo", lo}, {"hi", hi}, {"hops", 100}}}}};
  };
  json meta = {{"format", "cptrace"},
               {"start", {{"tsc", kO}, {"mono_ns", kM0}}},
               {"complete", false},
               {"tsc",
                {{"skew_ticks", {{"at_start", {-280, 300}}, {"at_stop", nullptr}}},
                 {"skew", {{"at_start", measure(-280, 300)}, {"at_stop", nullptr}}}}}};
  json done = meta;
  done["tsc"]["skew_ticks"]["at_stop"] = {-260, 270};
  done["tsc"]["skew"]["at_stop"] = measure(-260, 270);
  TraceWriter w(dir, meta, true);
  TraceTail tail(dir + "/events.cpt");
  std::vector<ClockPoint> pts;
  for (uint64_t k = 0; k <= 4; ++k) pts.push_back({kO + k * 500'000'000, kM0 + k * 500'000'000, 40, 0});
  w.write(encode_clock(pts));
  tail.poll([](const std::vector<TraceEvent>&) {});
  const uint64_t a = channel_arg_id("a"), b = channel_arg_id("b");
  const uint8_t user = uint8_t(EventKind::User), on_cpu = uint8_t(Timebase::TscOnCpu);
  auto watch = [&](bool cross, const json& m) {
    LiveView view(1000, {{"a", "b"}});
    std::vector<TraceEvent> evs;
    for (uint64_t i = 0; i < 1000; ++i) {
      uint64_t t = kO + 1000 + i * 100'000;
      evs.push_back({t, a, i, 1, 1, 0, user, on_cpu});
      evs.push_back({t + 5000, b, i, 1, 1, uint16_t(cross ? i % 2 : 0), user, on_cpu});  // odd ids: CPU 1
    }
    view.add(evs);
    view.update(tail, m);
    json p = view.snapshot(tail)["pairs"][0];
    EXPECT_EQ(p["count"], 1000u) << p.dump();
    return p;
  };
  const double tick = 1e-9;  // the points' 1 GHz
  EXPECT_EQ(watch(false, meta)["width_max_s"].get<double>(), 0) << "one CPU: exact";
  json live = watch(true, meta), stopped = watch(true, done);
  EXPECT_NEAR(live["width_max_s"].get<double>(), 2 * 300 * tick, 1e-12) << "CPU 1's start interval alone";
  EXPECT_NEAR(live["lo_min_s"].get<double>(), (5000 - 300) * tick, 1e-12);
  EXPECT_NEAR(live["hi_max_s"].get<double>(), (5000 + 300) * tick, 1e-12);
  EXPECT_NEAR(stopped["width_max_s"].get<double>(), 2 * 300 * tick, 1e-12) << "CPU 1's interval alone";
  EXPECT_NEAR(stopped["lo_min_s"].get<double>(), (5000 - 300) * tick, 1e-12);
  EXPECT_NEAR(stopped["hi_max_s"].get<double>(), (5000 + 300) * tick, 1e-12);
}

}  // namespace
