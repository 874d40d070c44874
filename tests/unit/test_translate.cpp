// Ground truth on synthetic multi-node recordings: three nodes with offsets of
// seconds, skews of tens to hundreds of ppm and asymmetric delays, written with
// TraceWriter, translated and analysed through the library. EVERY bound must
// contain the truth, for every method; widths are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "latency/local_latency.h"
#include "latency/latency.h"
#include "test_util.h"
#include "truth_util.h"
#include "trace/trace_reader.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"
#include "synth_cluster.h"

namespace cptrace {
namespace {

using testutil::TempDir;
constexpr long double kSpan = 6e9L;  // 6 s

synth::Cluster three_nodes(uint64_t seed, long double kink_ppm = 0) {
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  if (kink_ppm != 0) b.kink_ns = 3e9L, b.kink_ppm = kink_ppm;
  synth::Cluster cl({a, b, c}, seed);
  cl.asym_ns[{0, 1}] = 120000;  // A -> B 120 us slower than B -> A
  cl.asym_ns[{2, 1}] = 40000;
  return cl;
}

std::vector<std::string> write_all(const synth::Cluster& cl, const TempDir& tmp) {
  std::vector<std::string> dirs;
  for (size_t i = 0; i < cl.size(); ++i) {
    dirs.push_back(tmp / cl.clock(int(i)).name);
    cl.write(int(i), dirs.back(), kSpan);
  }
  return dirs;
}

// Rounds between every two nodes, or only between the reference A and each other node.
const std::vector<std::pair<int, int>> kAllPairs = {{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}};
const std::vector<std::pair<int, int>> kWithA = {{0, 1}, {1, 0}, {0, 2}, {2, 0}};

// A cluster's recordings written under tmp and translated onto `reference` into tmp/out.
struct Translated {
  std::vector<std::string> dirs;
  TranslateOptions o;
  TranslateSummary s;
};

Translated write_and_translate(const synth::Cluster& cl, const TempDir& tmp, Method method = Method::Best,
                               const std::string& reference = "A") {
  Translated t{write_all(cl, tmp), {}, {}};
  t.o = {t.dirs, reference, tmp / "out", method, true};
  t.s = translate(t.o);
  return t;
}

struct Widths {
  std::map<std::string, std::vector<int64_t>> by_scenario;
  size_t checked = 0, contained = 0;
};

// Every translated instant's [lo, hi] contains the true reference-clock value.
void check_instants(const synth::Cluster& cl, const std::string& out, size_t& checked) {
  TraceReader r(out);
  std::vector<TranslatedEvent> evs;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      long double truth = cl.truth_ref(e.node, e.local_ts, 0);
      ASSERT_TRUE(truth >= e.ref_lo && truth <= e.ref_hi)
          << "node " << e.node << " ts " << e.local_ts << " [" << e.ref_lo << ", " << e.ref_hi << "] truth "
          << (double)truth;
      checked++;
    }
  });
}

void check_latency(const synth::Cluster& cl, const std::string& out, const std::string& c1, const std::string& c2,
                   Widths& w) {
  LatencyResult res = latency(out, c1, c2);
  ASSERT_FALSE(res.rows.empty());
  ASSERT_TRUE(res.have_ns);
  for (const LatencyRow& row : res.rows) {
    long double t = cl.truth_ticks(c1, c2, row.tuple, 0), ns = cl.truth_ns(c1, c2, row.tuple);
    w.checked++;
    bool ok = t >= row.ticks_lo && t <= row.ticks_hi && ns >= row.ns_lo && ns <= row.ns_hi;
    w.contained += ok;
    EXPECT_TRUE(ok) << c1 << "->" << c2 << " tuple " << row.tuple << " " << row.scenario << " ticks [" << row.ticks_lo
                    << ", " << row.ticks_hi << "] truth " << (double)t << "; ns [" << row.ns_lo << ", " << row.ns_hi
                    << "] truth " << (double)ns;
    w.by_scenario[row.scenario].push_back(row.ns_hi - row.ns_lo);
  }
}

void print_widths(const char* label, Widths& w) {
  for (auto& [sc, v] : w.by_scenario) {
    std::sort(v.begin(), v.end());
    printf("  [%s] %-28s n=%5zu  bound width median %8lld ns  max %8lld ns\n", label, sc.c_str(), v.size(),
           (long long)v[v.size() / 2], (long long)v.back());
  }
  printf("  [%s] containment %zu / %zu\n", label, w.contained, w.checked);
}

const std::vector<std::pair<std::string, std::string>> kHops = {
    {"A.out", "B.in"}, {"B.in", "B.out"}, {"B.out", "C.in"}, {"A.out", "C.in"}, {"B.in", "C.in"}, {"C.in", "A.out"}};

TEST(TranslateGroundTruth, ThreeNodesEveryBoundContainsTruthAllMethods) {
  synth::Cluster cl = three_nodes(11);
  cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
  cl.pipeline(3000, 200e6L, 1.8e6L);
  TempDir tmp;
  auto dirs = write_all(cl, tmp);
  for (const char* method : {"ratio", "hull", "best"}) {
    TranslateOptions o{dirs, "A", tmp / (std::string("out-") + method), parse_method(method), true};
    TranslateSummary s = translate(o);
    EXPECT_EQ(s.events, 4u * 3000u);
    size_t instants = 0;
    check_instants(cl, o.out, instants);
    EXPECT_EQ(instants, 4u * 3000u);
    Widths w;
    for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
    EXPECT_EQ(w.contained, w.checked);
    EXPECT_TRUE(w.by_scenario.count("remote-remote-direct"));
    EXPECT_TRUE(w.by_scenario.count("reference-remote"));
    EXPECT_TRUE(w.by_scenario.count("local"));
    print_widths(method, w);
  }
}

// Nodes whose TSCs tick at different nominal frequencies (2.5, 2.1 and 2.8 ticks
// per ns, each off by its skew, B changing rate mid-run): under --clock-model
// piecewise every instant and every duration contains the truth (a rate interval
// around 1 instead of the nominal ratio contradicts the rounds or is false).
TEST(TranslateGroundTruth, PiecewiseWithNodesAtDifferentFrequencies) {
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150, 3e9L, -230, 2.1L},
      c{"C", 1.0e15L - 4.3e9L, -80, INFINITY, 0, 2.8L};
  synth::Cluster cl({a, b, c}, 41);
  // Each node's calibration gives its oscillator's nominal frequency (like "tsc:
  // Detected 2100.000 MHz"): the true rates are off it by the skews, within rho.
  for (int i = 0; i < 3; ++i) cl.extra_meta[i] = {{"tsc_hz", double(cl.clock(i).f * 1e9L)}};
  cl.asym_ns[{0, 1}] = 120000;
  cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
  cl.pipeline(3000, 200e6L, 1.8e6L);
  TempDir tmp;
  TranslateOptions o{write_all(cl, tmp), "A", tmp / "out", Method::Best, true};
  o.clock_model = ClockModel::Piecewise;
  TranslateSummary s = translate(o);
  size_t seen = 0;
  for (const auto& p : s.meta["translated"]["pairs"])
    if (p["from"] == "B" && p["to"] == "A") {
      seen++;
      EXPECT_NEAR(p["piecewise"]["rate_interval"][0].get<double>(), 2.5 / 2.1 * (1 - 500e-6), 1e-9);
      EXPECT_NEAR(p["piecewise"]["rate_interval"][1].get<double>(), 2.5 / 2.1 * (1 + 500e-6), 1e-9);
    }
  EXPECT_EQ(seen, 1u);
  size_t instants = 0;
  check_instants(cl, o.out, instants);
  EXPECT_EQ(instants, 4u * 3000u);
  Widths w;
  for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
  EXPECT_EQ(w.contained, w.checked);
  EXPECT_TRUE(w.by_scenario.count("remote-remote-direct"));
  print_widths("piecewise, 2.5/2.1/2.8 GHz", w);
}

// `dump` of a translated trace prints every event once, with its node, the bound
// around its estimate, and the same instants the trace holds.
TEST(TranslateGroundTruth, DumpOfTranslatedTraceListsEveryEventWithBound) {
  synth::Cluster cl = three_nodes(5);
  cl.sync_all(kWithA, kSpan, 50, 250e6L);
  cl.pipeline(500, 200e6L, 1.8e6L);
  TempDir tmp;
  auto [dirs, o, s] = write_and_translate(cl, tmp);
  auto r = testutil::run(testutil::cptrace_bin() + " dump --csv " + o.out, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "node,kind,local_ts,ref_est,ref_lo,ref_hi,channel,tuple,pid,tid,cpu");
  std::map<std::string, size_t> per_node;
  size_t rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 11u) << line;
    long long est = std::stoll(f[3]), lo = std::stoll(f[4]), hi = std::stoll(f[5]);
    EXPECT_LE(lo, est) << line;
    EXPECT_LE(est, hi) << line;
    if (f[0] == "A") {
      EXPECT_EQ(lo, hi) << "the reference's own events are exact: " << line;
    }
    ++per_node[f[0]], ++rows;
  }
  EXPECT_EQ(rows, s.events);
  EXPECT_EQ(per_node.size(), 3u);
  EXPECT_GT(per_node["B"], 0u);
}

// B and C never probe each other: their durations go through the reference.
// C is also related to A only through B in a second run (a chain): composed path.
TEST(TranslateGroundTruth, ViaReferenceAndComposedPaths) {
  {
    synth::Cluster cl = three_nodes(12);
    cl.sync_all(kWithA, kSpan, 50);
    cl.pipeline(1000, 200e6L, 5e6L);
    TempDir tmp;
    const TranslateOptions o = write_and_translate(cl, tmp).o;
    Widths w;
    for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
    EXPECT_EQ(w.contained, w.checked);
    EXPECT_TRUE(w.by_scenario.count("remote-remote-via-reference"));
    print_widths("best, no B-C rounds", w);
  }
  {
    synth::Cluster cl = three_nodes(13);
    cl.sync_all({{0, 1}, {1, 0}, {1, 2}}, kSpan, 50);  // C only talks to B
    cl.pipeline(1000, 200e6L, 5e6L);
    TempDir tmp;
    auto dirs = write_all(cl, tmp);
    for (const char* method : {"ratio", "hull", "best"}) {
      TranslateOptions o{dirs, "A", tmp / (std::string("out") + method), parse_method(method), true};
      TranslateSummary s = translate(o);
      EXPECT_EQ(s.meta["translated"]["nodes"][2]["path"], nlohmann::json({"C", "B", "A"}));
      size_t n = 0;
      check_instants(cl, o.out, n);
      Widths w;
      for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
      EXPECT_EQ(w.contained, w.checked);
      print_widths((std::string(method) + ", chain C-B-A").c_str(), w);
    }
  }
}

// B's rate changes by 300 ppm mid-run: the hulls of A-B cross; the translated
// trace says so, and outside the transition every bound still holds.
TEST(TranslateGroundTruth, NonLinearClockIsReported) {
  synth::Cluster cl = three_nodes(14, 300);
  cl.sync_all(kAllPairs, kSpan, 50, 100e6L);
  cl.pipeline(1000, 200e6L, 5e6L);
  TempDir tmp;
  auto [dirs, o, s] = write_and_translate(cl, tmp, Method::Hull);
  bool reported = false;
  std::vector<std::pair<int64_t, int64_t>> tr;
  for (const auto& p : s.meta["translated"]["pairs"])
    if (p["from"] == "B" && p["to"] == "A") {
      reported = !p["hull"]["linear"].get<bool>();
      tr = p["hull"]["transitions"].get<std::vector<std::pair<int64_t, int64_t>>>();
    }
  EXPECT_TRUE(reported);
  ASSERT_FALSE(tr.empty());
  EXPECT_GT(s.meta["translated"]["nodes"][1]["events_in_transition"].get<uint64_t>(), 0u);
  TraceReader r(o.out);
  std::vector<TranslatedEvent> evs;
  size_t checked = 0, skipped = 0;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      if (e.node == 1 && std::any_of(tr.begin(), tr.end(), [&](auto& t) {
            return int64_t(e.local_ts) >= t.first && int64_t(e.local_ts) <= t.second;
          })) {
        skipped++;
        continue;
      }
      long double truth = cl.truth_ref(e.node, e.local_ts, 0);
      EXPECT_TRUE(truth >= e.ref_lo && truth <= e.ref_hi) << "node " << e.node << " ts " << e.local_ts;
      checked++;
    }
  });
  printf("  [non-linear B] %zu instants checked, %zu in the reported transition skipped\n", checked, skipped);
  EXPECT_GT(checked, skipped);
}

// Durations in ns while an NTP client bends the nodes' CLOCK_MONOTONIC (the repros
// chrony-miss-1 and slew-miss-1: a TSC frequency measured against MONOTONIC put its
// +150..+628 ppm average slew into every duration, 1.5-12 us on 10-25 ms). The
// synthetic RAW is true time; every node's MONOTONIC runs 628 ppm fast with a 2 %
// tick slew in its middle second: the ns bounds of translate and of a one-node
// latency must hold the true durations all the same.
TEST(TranslateGroundTruth, NsBoundsHoldWhileMonotonicIsSlewed) {
  synth::Cluster cl = three_nodes(21);
  auto slewed = [](long double t) {
    long double tick = std::clamp(t - 2e9L, 0.0L, 1e9L) * 0.02L;
    return t * (1 + 628e-6L) + tick;
  };
  for (int i = 0; i < 3; i++) cl.mono_of[i] = slewed;
  cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
  cl.pipeline(2000, 200e6L, 2.5e6L);
  TempDir tmp;
  auto [dirs, o, s] = write_and_translate(cl, tmp);
  EXPECT_EQ(s.meta["translated"]["frequency"]["clock"], "CLOCK_MONOTONIC_RAW");
  Widths w;
  for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
  EXPECT_EQ(w.contained, w.checked);
  print_widths("slewed monotonic", w);
  // One node's trace alone: ns over its own RAW frequency.
  TraceReader r(dirs[1]);
  MemoryBudget budget;
  budget.temp_dir = tmp.path.string();
  LatencyResult local = node_latency_stream(r, "B.in", "B.out", budget);
  ASSERT_TRUE(local.have_ns);
  size_t n = 0, in = 0;
  local.for_each_row([&](const LatencyRow& row) {
    long double ns = cl.truth_ns("B.in", "B.out", row.tuple);
    n++;
    in += ns >= row.ns_lo && ns <= row.ns_hi;
  });
  EXPECT_EQ(n, 2000u);
  EXPECT_EQ(in, n) << "one-node latency in ns under a slewed MONOTONIC";
}

// Counts, over every hop of the pipeline, the rows whose ticks bound holds the
// truth on node `ref`'s clock, without asserting: the callers also want runs that
// must miss. `row_of` sees each hop's rows.
void count_contained(
    const synth::Cluster& cl, const std::string& out, int ref, Widths& w,
    const std::function<void(const std::string&, const std::string&, const LatencyRow&)>& row_of = {}) {
  for (auto& [c1, c2] : kHops) {
    LatencyResult res = latency(out, c1, c2);
    for (const LatencyRow& row : res.rows) {
      long double t = cl.truth_ticks(c1, c2, row.tuple, ref);
      w.checked++;
      w.contained += t >= row.ticks_lo && t <= row.ticks_hi;
      w.by_scenario[row.scenario].push_back(row.ns_hi - row.ns_lo);
      if (row_of) row_of(c1, c2, row);
    }
  }
}

// A node whose CPUs' TSCs are apart (B.out stamped on a CPU 250 ticks ahead of
// the one B.in and the clock points use): with the skew the recorder measured
// in meta.json every duration holds its truth; without it, B's local hop misses.
TEST(TranslateGroundTruth, CrossCpuSkewIsCarriedIntoEveryBound) {
  auto run = [](bool measured, Widths& w) {
    synth::Cluster cl = three_nodes(23);
    cl.channel_skew["B.out"] = 250;
    if (measured) cl.extra_meta[1] = {{"tsc", {{"skew_ticks", {{"at_start", {-280, 300}}, {"at_stop", {-260, 270}}}}}}};
    cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
    cl.pipeline(2000, 200e6L, 2.5e6L);
    TempDir tmp;
    count_contained(cl, write_and_translate(cl, tmp, Method::Best, "B").o.out, 1, w);
  };
  Widths with, without;
  run(true, with);
  EXPECT_EQ(with.contained, with.checked);
  print_widths("skew carried", with);
  run(false, without);
  EXPECT_LT(without.contained, without.checked) << "the skew must matter to the local hop, or this proves nothing";
  printf("  [skew not carried] %zu of %zu outside their bound\n", without.checked - without.contained, without.checked);
}

// Stamps that name their CPU carry that CPU's skew only: on the reference node
// B, B.in is read on CPU 0 (the skew measures' reference CPU: no skew) and B.out
// on CPU 1, 250 ticks ahead, inside CPU 1's measured [-280, 300]. Every bound
// holds the truth, and B.in -> B.out is as wide as CPU 1's interval, once (it
// carried the widest interval for both stamps). Named CPU 0 instead, B.out's
// skew goes uncarried and bounds miss: the name is what the width rests on.
TEST(TranslateGroundTruth, AStampThatNamesItsCpuCarriesThatCpusSkewOnly) {
  auto run = [](uint16_t out_cpu, Widths& w, int64_t& local_width) {
    synth::Cluster cl = three_nodes(29);
    cl.channel_skew["B.out"] = 250;
    cl.channel_cpu = {{"B.in", 0}, {"B.out", out_cpu}};
    auto measure = [](int64_t lo, int64_t hi) {
      return nlohmann::json{{"reference_cpu", 0}, {"cpus", {{{"cpu", 1}, {"lo", lo}, {"hi", hi}, {"hops", 100}}}}};
    };
    cl.extra_meta[1] = {{"tsc",
                         {{"skew_ticks", {{"at_start", {-280, 300}}, {"at_stop", {-260, 270}}}},
                          {"skew", {{"at_start", measure(-280, 300)}, {"at_stop", measure(-260, 270)}}}}}};
    cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
    cl.pipeline(2000, 200e6L, 2.5e6L);
    TempDir tmp;
    count_contained(cl, write_and_translate(cl, tmp, Method::Best, "B").o.out, 1, w,
                    [&](const std::string& c1, const std::string& c2, const LatencyRow& row) {
                      if (c1 == "B.in" && c2 == "B.out")
                        local_width = std::max(local_width, row.ticks_hi - row.ticks_lo);
                    });
  };
  Widths named, misnamed;
  int64_t width = 0, ignored = 0;
  run(1, named, width);
  EXPECT_EQ(named.contained, named.checked);
  EXPECT_EQ(width, 2 * 300) << "B.in on CPU 0 carries no skew, B.out CPU 1's 300 ticks";
  printf("  [cpu named] %zu of %zu contained; B.in -> B.out %lld ticks wide (the widest skew on both: %d)\n",
         named.contained, named.checked, (long long)width, 4 * 300);
  run(0, misnamed, ignored);
  EXPECT_LT(misnamed.contained, misnamed.checked) << "the CPU named must matter, or this proves nothing";
}

// The same stamps on a node that is not the reference: B.in -> B.out, scaled
// to A's clock, is widened by CPU 1's 300 ticks once (B.in's CPU 0 carries
// none), where it was the widest skew twice on both ends; and B's trace alone
// gives `latency` the same width. Every bound holds its truth.
TEST(TranslateGroundTruth, ASameNodeDurationOffTheReferenceCarriesItsCpusSkews) {
  synth::Cluster cl = three_nodes(37);
  cl.channel_skew["B.out"] = 250;
  cl.channel_cpu = {{"B.in", 0}, {"B.out", 1}};
  auto measure = [](int64_t lo, int64_t hi) {
    return nlohmann::json{{"reference_cpu", 0}, {"cpus", {{{"cpu", 1}, {"lo", lo}, {"hi", hi}, {"hops", 100}}}}};
  };
  // CPU 1 at +-300; another CPU measured at +-900 sets the widest.
  nlohmann::json start = measure(-280, 300), stop = measure(-260, 270);
  start["cpus"].push_back({{"cpu", 2}, {"lo", -900}, {"hi", 900}, {"hops", 100}});
  cl.extra_meta[1] = {{"tsc",
                       {{"skew_ticks", {{"at_start", {-900, 900}}, {"at_stop", {-260, 270}}}},
                        {"skew", {{"at_start", start}, {"at_stop", stop}}}}}};
  cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
  cl.pipeline(2000, 200e6L, 2.5e6L);
  TempDir tmp;
  auto [dirs, o, s] = write_and_translate(cl, tmp, Method::Best, "A");
  Widths w;
  int64_t widest = 0, narrowest = INT64_MAX;
  count_contained(cl, o.out, 0, w, [&](const std::string& c1, const std::string& c2, const LatencyRow& row) {
    if (c1 != "B.in" || c2 != "B.out") return;
    EXPECT_EQ(row.scenario, "local");
    widest = std::max(widest, row.ticks_hi - row.ticks_lo);
    narrowest = std::min(narrowest, row.ticks_hi - row.ticks_lo);
  });
  EXPECT_EQ(w.contained, w.checked);
  // Scaled to A's clock the width grows by the rates' spread over 2.5 ms, ticks.
  EXPECT_GE(narrowest, 2 * 300);
  EXPECT_LT(widest, 2 * 300 + 100) << "CPU 1's interval once, not the widest (900) on both ends";
  printf("  [off the reference] %zu of %zu contained; B.in -> B.out %lld..%lld ticks wide (widest on both: %d)\n",
         w.contained, w.checked, (long long)narrowest, (long long)widest, 4 * 900);
  TraceReader r(dirs[1]);
  MemoryBudget budget;
  budget.temp_dir = tmp.path.string();
  LatencyResult local = node_latency_stream(r, "B.in", "B.out", budget);
  size_t n = 0, in = 0, exact_width = 0;
  local.for_each_row([&](const LatencyRow& row) {
    long double t = cl.truth_ticks("B.in", "B.out", row.tuple, 1);
    n++;
    in += t >= row.ticks_lo && t <= row.ticks_hi;
    exact_width += row.ticks_hi - row.ticks_lo == 2 * 300;
  });
  EXPECT_EQ(n, 2000u);
  EXPECT_EQ(in, n) << "one node's trace alone";
  EXPECT_EQ(exact_width, n) << "one node's trace alone: CPU 1's interval once";
}

// A loaded node measures a wide TSC skew across its CPUs (here 40 000 ticks =
// 16 us on every node, more than half of any responder's 15-25 us hold). Each
// round is checked on its recorded stamps and only then widened: widened, t3
// falls before t2, yet both halves stay true causal constraints. Checked the
// other way round every round was "inconsistent" and no node had a path.
TEST(TranslateGroundTruth, SkewWiderThanTheResponderHoldKeepsEveryRound) {
  synth::Cluster cl = three_nodes(31);
  for (size_t i = 0; i < 3; ++i)
    cl.extra_meta[i] = {{"tsc", {{"skew_ticks", {{"at_start", {-40000, 40000}}, {"at_stop", {-100, 100}}}}}}};
  cl.sync_all(kAllPairs, kSpan, 50, 250e6L);
  cl.pipeline(2000, 200e6L, 2.5e6L);
  TempDir tmp;
  auto [dirs, o, s] = write_and_translate(cl, tmp);
  size_t pairs = 0;
  for (const auto& p : s.meta["translated"]["pairs"]) {
    if (!p.contains("rounds_inconsistent")) continue;
    pairs++;
    EXPECT_EQ(p["rounds_inconsistent"], 0) << p["from"] << "->" << p["to"];
  }
  EXPECT_GT(pairs, 0u);
  Widths w;
  for (auto& [c1, c2] : kHops) check_latency(cl, o.out, c1, c2, w);
  EXPECT_EQ(w.checked, 2000u * kHops.size());
  EXPECT_EQ(w.contained, w.checked);
  print_widths("skew wider than the hold", w);
}

// latency reads each pair's relation back from meta.json (pair_relation): under
// every method it is the relation translate chose, also where the hulls of A-B
// cross (best then uses the split hull alone, not its intersection with the ratio).
TEST(TranslateGroundTruth, PairRelationReadBackIsTheOneChosen) {
  synth::Cluster cl = three_nodes(14, 300);
  cl.sync_all(kWithA, kSpan, 50, 100e6L);
  cl.pipeline(100, 200e6L, 5e6L);
  TempDir tmp;
  auto dirs = write_all(cl, tmp);
  for (Method m : {Method::Ratio, Method::Hull, Method::Best}) {
    TranslateOptions o{dirs, "A", tmp / ("out-" + name_of(m)), m, true};
    o.accept_suspect_sync = true;  // ratio over crossing hulls is a finding
    TranslateSummary s = translate(o);
    EXPECT_EQ(s.meta["translated"]["method"], name_of(m));
    size_t pairs = 0, split = 0;
    for (const auto& p : s.meta["translated"]["pairs"]) {
      ASSERT_TRUE(p.contains("relation")) << name_of(m) << " " << p.dump();
      RelationPtr r = pair_relation(p, m);
      ASSERT_TRUE(r) << name_of(m) << " " << p["from"] << "->" << p["to"];
      EXPECT_EQ(r->to_json(), p["relation"]) << name_of(m) << " " << p["from"] << "->" << p["to"];
      pairs++;
      if (!p["hull"]["linear"].get<bool>()) {
        split++;
        if (m != Method::Ratio) {
          EXPECT_EQ(p["relation"], p["hull"]["relation"]) << name_of(m);
        }
      } else if (m == Method::Best) {
        EXPECT_EQ(p["relation"]["type"], "intersect");
      }
    }
    EXPECT_EQ(pairs, 4u) << name_of(m);
    EXPECT_EQ(split, 2u) << name_of(m) << ": A->B and B->A cross";
  }
}

// Every choice has one name, the same both ways; anything else is refused with
// the flag (or where it was read), the value and the names there are.
TEST(TranslateChoices, NamesRoundTripAndBadNamesAreNamed) {
  for (Method m : {Method::Ratio, Method::Hull, Method::Best}) EXPECT_EQ(parse_method(name_of(m)), m);
  for (ClockModel c : {ClockModel::Linear, ClockModel::Piecewise}) EXPECT_EQ(parse_clock_model(name_of(c)), c);
  for (Inputs i : {Inputs::Both, Inputs::Rounds, Inputs::Traffic}) EXPECT_EQ(parse_inputs(name_of(i)), i);
  EXPECT_EQ(name_of(Method::Best), "best");
  EXPECT_EQ(name_of(ClockModel::Piecewise), "piecewise");
  EXPECT_EQ(name_of(Inputs::Traffic), "traffic");
  auto message = [](auto parse) {
    try {
      parse();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message([] { parse_method("Best"); }), "--method Best: must be ratio, hull or best");
  EXPECT_EQ(message([] { parse_clock_model(""); }), "--clock-model : must be linear or piecewise");
  EXPECT_EQ(message([] { parse_inputs("all", "meta.json translated.inputs"); }),
            "meta.json translated.inputs all: must be both, rounds or traffic");
}

TEST(TranslateErrors, MissingSamplesNoPathOverlapMismatchUnknownChannel) {
  TempDir tmp;
  synth::Cluster cl = three_nodes(15);
  cl.rounds(0, 1, "start", 1e6L, 20, 5e5L);  // A-B: start only; C: nothing
  cl.pipeline(10, 200e6L, 5e6L);
  auto dirs = write_all(cl, tmp);
  std::string e = truth::translate_error({dirs, "A", tmp / "o1", Method::Ratio, true});
  EXPECT_NE(e.find("MinRTT2 (stop)"), std::string::npos) << e;
  e = truth::translate_error({{dirs[0], dirs[1]}, "A", tmp / "o2", Method::Ratio, true});
  EXPECT_NE(e.find("no path"), std::string::npos) << e;
  EXPECT_NE(e.find("MinRTT2"), std::string::npos) << e;
  e = truth::translate_error({dirs, "A", tmp / "o3", Method::Best, true});
  EXPECT_NE(e.find("node \"C\""), std::string::npos) << e;
  EXPECT_NE(e.find("no MinRTT rounds"), std::string::npos) << e;
  e = truth::translate_error({{dirs[0], dirs[0]}, "A", tmp / "o4", Method::Best, true});
  EXPECT_NE(e.find("overlapping recordings"), std::string::npos) << e;
  e = truth::translate_error({dirs, "Z", tmp / "o5", Method::Best, true});
  EXPECT_NE(e.find("--reference Z"), std::string::npos) << e;

  // A round whose peer stamps belong to another run of the peer.
  synth::Cluster c2 = three_nodes(16);
  c2.sync_all({{0, 1}, {1, 0}}, kSpan, 10);
  c2.node_rounds(0)[0].t2 += uint64_t(1e12);
  TempDir t2;
  auto d2 = write_all(c2, t2);
  e = truth::translate_error({{d2[0], d2[1]}, "A", t2 / "o", Method::Best, true});
  EXPECT_NE(e.find("mismatched recordings"), std::string::npos) << e;

  // Unknown channel in latency.
  synth::Cluster c3 = three_nodes(17);
  c3.sync_all(kWithA, kSpan, 10);
  c3.pipeline(10, 200e6L, 5e6L);
  TempDir t3;
  const std::string out3 = write_and_translate(c3, t3).o.out;
  try {
    latency(out3, "A.out", "nope");
    ADD_FAILURE() << "no error for an unknown channel";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("unknown channel \"nope\""), std::string::npos) << ex.what();
    EXPECT_NE(std::string(ex.what()).find("B.in"), std::string::npos) << ex.what();
  }
}

// Tuples seen on one side only are counted, not dropped silently.
TEST(TranslateGroundTruth, UnmatchedTuplesAreCounted) {
  synth::Cluster cl = three_nodes(18);
  cl.sync_all(kWithA, kSpan, 10);
  cl.pipeline(100, 200e6L, 5e6L);
  cl.event(0, "A.out", 5000, 4e9L);  // never reaches C
  cl.event(0, "A.out", 5001, 4e9L);
  cl.event(2, "C.in", 7000, 4e9L);  // never left A
  TempDir tmp;
  LatencyResult r = latency(write_and_translate(cl, tmp).o.out, "A.out", "C.in");
  EXPECT_EQ(r.rows.size(), 100u);
  EXPECT_EQ(r.from_only, 2u);
  EXPECT_EQ(r.to_only, 1u);
}

}  // namespace
}  // namespace cptrace
