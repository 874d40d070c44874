// translate with packets captured by `record --net` (Net frames) beside or instead
// of MinRTT rounds, on synthetic two-node recordings with known clocks: every
// bound contains the truth, and the output says which inputs bounded each pair
// (rounds, traffic, both) and why one did not.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <zstd.h>

#include <algorithm>

#include "synth_cluster.h"
#include "test_util.h"
#include "trace/net_codec.h"
#include "trace/trace_reader.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testutil::TempDir;
constexpr long double kSpan = 4e9L;

// A TCP connection A:5000 -> B:80 with data every `period` ns from A, replies from
// B every third segment when `both_ways`; kernel stamps are the true instants in
// ns (the synthetic clock stream maps true ns to each node's clock).
struct Traffic {
  std::vector<cp_net_rec> a, b;  // records of node A and of node B
  cp_net_rec seg(uint8_t kind, bool from_a, uint32_t seq, uint32_t len, uint8_t flags, long double t) {
    cp_net_rec r{};
    r.kind = kind, r.proto = IPPROTO_TCP, r.family = AF_INET, r.seq = seq, r.len = len, r.tcp_flags = flags;
    inet_pton(AF_INET, from_a ? "10.0.0.1" : "10.0.0.2", r.saddr);
    inet_pton(AF_INET, from_a ? "10.0.0.2" : "10.0.0.1", r.daddr);
    r.sport = from_a ? 5000 : 80, r.dport = from_a ? 80 : 5000;
    r.ktime_ns = uint64_t(t);
    return r;
  }
  void send(bool from_a, long double t, long double d, uint32_t seq, uint32_t len, uint8_t flags = 0x10) {
    (from_a ? a : b).push_back(seg(CP_NET_PKT_TX, from_a, seq, len, flags, t));
    (from_a ? b : a).push_back(seg(CP_NET_PKT_RX, from_a, seq, len, flags, t + d));
  }
};

Traffic make_traffic(synth::Cluster& cl, bool both_ways, long double period) {
  Traffic tr;
  tr.send(true, 5e6L, cl.delay(0, 1), 100, 0, 0x02);
  tr.send(false, 5.2e6L, cl.delay(1, 0), 900, 0, 0x12);
  uint32_t sa = 101, sb = 901;
  int k = 0;
  for (long double t = 10e6L; t < kSpan - 10e6L; t += period, ++k) {
    tr.send(true, t, cl.delay(0, 1), sa, 1000), sa += 1000;
    if (both_ways && k % 3 == 0) tr.send(false, t + 30000, cl.delay(1, 0), sb, 100), sb += 100;
  }
  return tr;
}

std::vector<std::string> write_two(const synth::Cluster& cl, const Traffic& tr, const TempDir& tmp) {
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    const std::vector<cp_net_rec>& recs = i == 0 ? tr.a : tr.b;
    cl.write(i, dirs.back(), kSpan, 16384, [&](TraceWriter& w) {
      for (size_t k = 0; k < recs.size(); k += 4096)
        w.write(encode_net(recs.data() + k, std::min<size_t>(4096, recs.size() - k)));
    });
  }
  return dirs;
}

synth::Cluster two_nodes(uint64_t seed) {
  synth::Cluster cl({{"A", 1.0e15L, 20}, {"B", 1.0e15L + 8.1e9L, 150}}, seed);
  cl.asym_ns[{0, 1}] = 50000;
  for (int k = 0; k < 2000; ++k) cl.event(1, "B.ev", k, 20e6L + k * (kSpan - 40e6L) / 2000);
  return cl;
}

const nlohmann::json& pair_of(const TranslateSummary& s, const std::string& from) {
  for (const auto& p : s.meta["translated"]["pairs"])
    if (p["from"] == from) return p;
  throw std::runtime_error("no pair from " + from);
}

// Every translated instant of B contains its true A-clock value; returns widths.
std::vector<int64_t> check_all(const synth::Cluster& cl, const std::string& out) {
  TraceReader r(out);
  std::vector<TranslatedEvent> evs;
  std::vector<int64_t> w;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      long double truth = cl.truth_ref(e.node, e.local_ts, 0);
      EXPECT_TRUE(truth >= e.ref_lo && truth <= e.ref_hi)
          << "node " << e.node << " ts " << e.local_ts << " [" << e.ref_lo << ", " << e.ref_hi << "] truth "
          << (double)truth;
      w.push_back(e.ref_hi - e.ref_lo);
    }
  });
  EXPECT_EQ(w.size(), 2000u);
  std::sort(w.begin(), w.end());
  return w;
}

TEST(TranslateTraffic, TrafficAloneRoundsAloneAndBothContainTruth) {
  for (const char* variant : {"rounds", "traffic", "both"}) {
    synth::Cluster cl = two_nodes(21);
    bool rounds = std::string(variant) != "traffic", traffic = std::string(variant) != "rounds";
    if (rounds) cl.sync_all({{0, 1}, {1, 0}}, kSpan, 30);
    Traffic tr = traffic ? make_traffic(cl, true, 1e6L) : Traffic{};
    TempDir tmp;
    auto dirs = write_two(cl, tr, tmp);
    for (const char* method : {"hull", "best"}) {
      TranslateSummary s = translate({dirs, "A", tmp / (std::string("out-") + method), parse_method(method), true});
      const auto& in = pair_of(s, "B")["inputs"];
      EXPECT_EQ(in["bounded_by"], variant) << in.dump();
      if (!rounds) {
        EXPECT_EQ(in["rounds_alone"], "no MinRTT rounds");
      }
      if (traffic) {
        EXPECT_GT(in["packets_from_to"].get<size_t>(), 1000u);
        EXPECT_GT(s.meta["translated"]["packets"]["matched"].get<uint64_t>(), 5000u);
        EXPECT_EQ(s.meta["translated"]["packets"]["ambiguous"].get<uint64_t>(), 0u);
      }
      std::vector<int64_t> w = check_all(cl, tmp / (std::string("out-") + method));
      printf("  [%s, %s] bound width median %lld max %lld ticks\n", variant, method, (long long)w[w.size() / 2],
             (long long)w.back());
    }
  }
}

TEST(TranslateTraffic, OneWayTrafficAloneIsRefusedWithTheReason) {
  synth::Cluster cl = two_nodes(22);
  Traffic tr = make_traffic(cl, false, 1e6L);
  TempDir tmp;
  auto dirs = write_two(cl, tr, tmp);
  std::string err;
  try {
    translate({dirs, "A", tmp / "out", Method::Best, true});
  } catch (const std::exception& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("no path"), std::string::npos) << err;
  EXPECT_NE(err.find("one direction only"), std::string::npos) << err;
  EXPECT_NE(err.find("no MinRTT rounds"), std::string::npos) << err;
  // With rounds too the pair is bounded, and the output says the traffic alone could not.
  synth::Cluster c2 = two_nodes(23);
  c2.sync_all({{0, 1}, {1, 0}}, kSpan, 30);
  Traffic t2 = make_traffic(c2, false, 1e6L);
  TempDir tmp2;
  TranslateSummary s = translate({write_two(c2, t2, tmp2), "A", tmp2 / "out", Method::Best, true});
  const auto& in = pair_of(s, "B")["inputs"];
  EXPECT_EQ(in["bounded_by"], "rounds");
  EXPECT_NE(in["traffic_alone"].get<std::string>().find("one direction only"), std::string::npos);
  check_all(c2, tmp2 / "out");
}

// Frames are translated a batch at a time on --threads threads and written in
// file order: the output is the same bytes for any number of threads, with
// packets and rounds, under every method and both clock models. Many small
// frames, so a batch holds several and threads share them.
TEST(TranslateThreads, SameBytesForAnyThreadCount) {
  synth::Cluster cl({{"A", 1.0e15L, 20}, {"B", 1.0e15L + 8.1e9L, 150, 2.1e9L, -180}}, 41);
  for (int k = 0; k < 6000; ++k) {
    cl.event(1, "B.ev", uint64_t(k) * 0x9e3779b97f4a7c15ull, 20e6L + k * (kSpan - 40e6L) / 6000);
    cl.event(0, "A.ev", k, 21e6L + k * (kSpan - 40e6L) / 6000);
  }
  cl.sync_all({{0, 1}, {1, 0}}, kSpan, 30);
  Traffic tr = make_traffic(cl, true, 1e6L);
  TempDir tmp;
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    const std::vector<cp_net_rec>& recs = i == 0 ? tr.a : tr.b;
    cl.write(i, dirs.back(), kSpan, 97, [&](TraceWriter& w) {
      for (size_t k = 0; k < recs.size(); k += 4096)
        w.write(encode_net(recs.data() + k, std::min<size_t>(4096, recs.size() - k)));
    });
  }
  ASSERT_GT(TraceReader(dirs[1]).event_frame_count(), 50u);
  // meta.json without the one line that differs run to run: the seconds taken.
  auto meta_of = [](const std::string& dir) {
    std::string m = testutil::read_file(dir + "/meta.json"), out;
    for (size_t at = 0; at < m.size();) {
      size_t nl = std::min(m.find('\n', at), m.size());
      std::string line = m.substr(at, nl - at);
      if (line.find("\"seconds\"") == std::string::npos) out += line + "\n";
      at = nl + 1;
    }
    return out;
  };
  for (ClockModel model : {ClockModel::Linear, ClockModel::Piecewise})
    for (Method method : {Method::Ratio, Method::Hull, Method::Best}) {
      if (model == ClockModel::Piecewise && method != Method::Best) continue;
      std::string events_one, meta_one;
      for (unsigned threads : {1u, 2u, 3u, 8u}) {
        TranslateOptions o{dirs, "A", tmp / "out", method, true};
        o.clock_model = model;
        o.threads = threads;
        o.accept_suspect_sync = true;  // the linear models across the rate change
        TranslateSummary s = translate(o);
        EXPECT_EQ(s.events, 12000u);
        std::string events = testutil::read_file(tmp / "out/events.cpt"), meta = meta_of(tmp / "out");
        if (threads == 1) {
          events_one = events, meta_one = meta;
          continue;
        }
        SCOPED_TRACE(name_of(model) + " " + name_of(method) + " threads " + std::to_string(threads));
        EXPECT_TRUE(events == events_one) << "events.cpt differs from --threads 1's";
        EXPECT_EQ(meta, meta_one);
      }
    }
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {

// Node B's clock changes rate mid-run (+150 ppm, then +150-180 = -30 ppm): no
// single line relates it to A. With --clock-model piecewise every bound contains
// the truth for rounds only (at start and stop), traffic only, and both.
TEST(TranslateTraffic, PiecewiseModelContainsTruthAcrossARateChange) {
  for (const char* variant : {"rounds", "traffic", "both"}) {
    synth::Cluster cl({{"A", 1.0e15L, 20}, {"B", 1.0e15L + 8.1e9L, 150, 2.1e9L, -180}}, 31);
    for (int k = 0; k < 2000; ++k) cl.event(1, "B.ev", k, 20e6L + k * (kSpan - 40e6L) / 2000);
    bool rounds = std::string(variant) != "traffic", traffic = std::string(variant) != "rounds";
    if (rounds) cl.sync_all({{0, 1}, {1, 0}}, kSpan, 30);
    Traffic tr = traffic ? make_traffic(cl, true, 1e6L) : Traffic{};
    TempDir tmp;
    auto dirs = write_two(cl, tr, tmp);
    TranslateOptions o{dirs, "A", tmp / "out", Method::Best, true};
    o.clock_model = ClockModel::Piecewise;
    TranslateSummary s = translate(o);
    const auto& p = pair_of(s, "B");
    EXPECT_EQ(p["inputs"]["bounded_by"], variant);
    EXPECT_TRUE(p.contains("piecewise"));
    std::vector<int64_t> w = check_all(cl, tmp / "out");
    printf("  [piecewise %s] bound width median %lld max %lld ticks\n", variant, (long long)w[w.size() / 2],
           (long long)w.back());
  }
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {

// --compression-level changes only how the Translated frames are packed: at
// zstd's fast levels the frames hold the same events, `latency` prints the same
// bytes, and meta.json differs only by the level it records (the default writes
// none, so its output stays what it was).
TEST(TranslateCompressionLevel, FastLevelsHoldTheSameEventsAndLatencyAnswers) {
  synth::Cluster cl({{"A", 1.0e15L, 20}, {"B", 1.0e15L + 8.1e9L, 150, 2.1e9L, -180}}, 43);
  for (int k = 0; k < 6000; ++k) {  // hashed ids, as a service's request ids are
    uint64_t id = uint64_t(k) * 0x9e3779b97f4a7c15ull;
    cl.event(0, "A.in", id, 20e6L + k * (kSpan - 40e6L) / 6000);
    cl.event(1, "B.out", id, 20.3e6L + k * (kSpan - 40e6L) / 6000);
  }
  cl.sync_all({{0, 1}, {1, 0}}, kSpan, 30);
  TempDir tmp;
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    cl.write(i, dirs.back(), kSpan, 97, [](TraceWriter&) {});
  }
  auto events_of = [](const std::string& dir) {
    std::vector<TranslatedEvent> all;
    for_each_translated(TraceReader(dir), 1, [&](const std::vector<TranslatedEvent>& evs) {
      all.insert(all.end(), evs.begin(), evs.end());
    });
    return all;
  };
  auto translated = [&](const std::string& out, int level) {
    TranslateOptions o{dirs, "A", out, Method::Best, true};
    o.compression_level = level;
    translate(o);
    nlohmann::json m = nlohmann::json::parse(testutil::read_file(out + "/meta.json"));
    m["translated"].erase("seconds");
    return m;
  };
  const std::string def = tmp / "default";
  nlohmann::json meta_def = translated(def, kTranslateDefaultLevel);
  EXPECT_FALSE(meta_def["translated"].contains("compression_level"));
  const std::vector<TranslatedEvent> want = events_of(def);
  ASSERT_EQ(want.size(), 12000u);
  const std::string latency_args = " --from A.in --to B.out --json";
  testutil::RunResult lat_def = testutil::run(testutil::cptrace_bin() + " latency " + def + latency_args, tmp);
  ASSERT_EQ(lat_def.status, 0) << lat_def.err;
  ASSERT_NE(lat_def.out.find("\"count\": 6000"), std::string::npos) << lat_def.out;
  for (int level : {-1, -5, ZSTD_minCLevel(), 3}) {
    SCOPED_TRACE("level " + std::to_string(level));
    const std::string out = tmp / ("level" + std::to_string(level));
    nlohmann::json meta = translated(out, level);
    ASSERT_EQ(meta["translated"].value("compression_level", 0), level);
    meta["translated"].erase("compression_level");
    EXPECT_EQ(meta, meta_def);
    EXPECT_TRUE(events_of(out) == want);
    // The level was applied: the frames are packed differently.
    EXPECT_NE(testutil::read_file(out + "/events.cpt"), testutil::read_file(def + "/events.cpt"));
    testutil::RunResult lat = testutil::run(testutil::cptrace_bin() + " latency " + out + latency_args, tmp);
    EXPECT_EQ(lat.status, 0) << lat.err;
    EXPECT_EQ(lat.out, lat_def.out);
  }
  // Beyond zstd's levels: refused before anything is written, naming flag and value.
  for (int level : {ZSTD_maxCLevel() + 1, ZSTD_minCLevel() - 1}) {
    TranslateOptions o{dirs, "A", tmp / "bad", Method::Best, true};
    o.compression_level = level;
    try {
      translate(o);
      ADD_FAILURE() << "level " << level << " accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("--compression-level " + std::to_string(level) + ": must be a zstd level"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad"));
  }
  testutil::RunResult cli = testutil::run(testutil::cptrace_bin() + " translate " + dirs[0] + " " + dirs[1] +
                                              " --reference A -o " + (tmp / "cli") + " --compression-level 99",
                                          tmp);
  EXPECT_NE(cli.status, 0);
  EXPECT_NE(cli.err.find("--compression-level 99: must be a zstd level in ["), std::string::npos) << cli.err;
}

}  // namespace
}  // namespace cptrace
