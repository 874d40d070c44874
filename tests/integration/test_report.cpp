// `cptrace report`: the HTML page rendered by real headless Chromium. The plots
// are drawn by the page's own script, so the DOM Chromium dumps after running it
// shows what a reader sees; its numbers must equal `cptrace throughput` and the
// known durations of the trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "synth_cluster.h"
#include "synthetic_trace.h"
#include "record_util.h"
#include "test_util.h"

using namespace cptrace;
using namespace testutil;
using nlohmann::json;

namespace {

constexpr uint64_t O = SyntheticTrace::kOrigin;
constexpr uint64_t MS = 1'000'000, US = 1'000;

#define REQUIRE_CHROMIUM()                                                                                            \
  do {                                                                                                                \
    if (chromium().empty()) GTEST_SKIP() << "SKIPPED: chromium is not installed (tools/install-deps.sh installs it)"; \
  } while (0)

// The page fetches nothing (self-contained) and its script ran without error;
// returns the DOM Chromium rendered.
std::string self_contained_dom(const std::string& html_path, const TempDir& tmp) {
  std::string html = read_file(html_path);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(std::regex_search(html, std::regex(R"(https?://(?!www\.w3\.org/2000/svg))")), false);
  std::string dom = rendered_dom(html_path, tmp);
  EXPECT_NE(dom.find("id=\"report\" data-rendered=\"1\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_EQ(dom.find("<p class=\"js-error\""), std::string::npos);
  return dom;
}

std::vector<std::smatch> all_matches(const std::string& s, const std::regex& re) {
  std::vector<std::smatch> out;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it) out.push_back(*it);
  return out;
}

// Tuple i: "in" at 1 ms * i, "out" 100 + 10 * (i % 10) us later (1000 tuples);
// drops on CPU 1.
SyntheticTrace report_trace() {
  SyntheticTrace t;
  t.channels = {{1, "in"}, {2, "out"}, {3, "idle"}};
  for (uint64_t i = 0; i < 1000; ++i) {
    t.add(1, O + i * MS, i, 0);
    t.add(2, O + i * MS + (100 + 10 * (i % 10)) * US, i, 1);
  }
  t.seen = {1000, 1007};
  t.dropped = {0, 7};
  return t;
}

// Every channel's polyline carries the counts it draws; they must be the
// throughput command's, period by period, and the polyline must have one point
// per period.
void expect_throughput_matches(const std::string& dom, const std::string& trace, double period_ms, const TempDir& tmp) {
  auto r = run(cptrace_bin() + " throughput " + trace + " --json --period " + std::to_string(period_ms), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json tp = json::parse(r.out);
  std::map<std::string, std::string> want;
  for (auto& c : tp["channels"]) {
    std::string s;
    for (auto& v : c["counts"]) s += (s.empty() ? "" : ",") + std::to_string(v.get<uint64_t>());
    want[c["name"]] = s;
  }
  static const std::regex line(R"re(<polyline points="([^"]*)"[^>]*data-channel="([^"]*)" data-counts="([^"]*)")re");
  std::map<std::string, std::string> got;
  for (auto& m : all_matches(dom, line)) {
    got[m[2]] = m[3];
    size_t points = std::count(m[1].first, m[1].second, ' ') + 1;
    EXPECT_EQ(points, tp["periods"].get<size_t>()) << m[2];
  }
  EXPECT_EQ(got, want);
  char title[64];
  snprintf(title, sizeof title, "events per %g ms period", period_ms);
  EXPECT_NE(dom.find(title), std::string::npos) << title;
}

// The latency table's rows: kind cell ("remote A -> B", "local (B)") -> data-key cells.
std::map<std::string, std::map<std::string, std::string>> latency_rows(const std::string& dom) {
  std::map<std::string, std::map<std::string, std::string>> rows;
  size_t at = dom.find("class=\"lat-stats\"");
  if (at == std::string::npos) return rows;
  std::string t = dom.substr(at, dom.find("</table>", at) - at);
  static const std::regex tr(R"re(<tr>(.*?)</tr>)re"), td(R"re(<td[^>]*>([^<]*)</td>)re"),
      keyed(R"re(data-key="(\w+)">([^<]*)<)re");
  for (auto& m : all_matches(t, tr)) {
    std::string row = m[1];
    auto cells = all_matches(row, td);
    if (cells.size() < 2) continue;  // the header
    auto& out = rows[cells[0].str(1) + " | " + cells[1].str(1)];
    for (auto& k : all_matches(row, keyed)) out[k[1]] = k[2];
  }
  return rows;
}

// What the table must show for a pair, computed from `cptrace latency --csv`:
// count, nearest-rank min/p50/p90/p99/max of the ns value and p50/max of the
// bound width ns_hi - ns_lo, in us with 3 decimals (ns are integers: exact).
// Only rows of the given node pair count.
std::map<std::string, std::string> table_from_latency_csv(const std::string& csv, const std::string& from_node,
                                                          const std::string& to_node) {
  std::vector<int64_t> v, w;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "tuple,from_node,to_node,scenario,ticks,ticks_lo,ticks_hi,ns,ns_lo,ns_hi");
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    if (f.size() != 10 || f[1] != from_node || f[2] != to_node) continue;
    v.push_back(std::stoll(f[7]));
    w.push_back(std::stoll(f[9]) - std::stoll(f[8]));
  }
  std::sort(v.begin(), v.end());
  std::sort(w.begin(), w.end());
  auto rank = [](const std::vector<int64_t>& x, double q) {
    size_t r = std::max<size_t>(1, size_t(std::ceil(q * double(x.size()))));
    return x[std::min(r, x.size()) - 1];
  };
  auto us = [](int64_t ns) {
    char b[64];
    snprintf(b, sizeof b, "%.3f", double(ns) / 1000.0);
    return std::string(b);
  };
  if (v.empty()) return {{"count", "0"}};
  return {{"count", std::to_string(v.size())}, {"min_s", us(v.front())},     {"p50_s", us(rank(v, 0.5))},
          {"p90_s", us(rank(v, 0.9))},         {"p99_s", us(rank(v, 0.99))}, {"max_s", us(v.back())},
          {"width_p50_s", us(rank(w, 0.5))},   {"width_max_s", us(w.back())}};
}

// The latency-over-time plot of one series: p50 and p99 with their bands, and
// max; its periods hold every tuple of the table, and the largest period max is
// the table's max.
void expect_over_time(const std::string& dom, const std::string& pair, const std::string& nodes,
                      const std::map<std::string, std::string>& table) {
  std::string head = "<g class=\"series\" data-pair=\"" + pair + "\" data-nodes=\"" + nodes + "\">";
  size_t at = dom.find(head);
  ASSERT_NE(at, std::string::npos) << "no latency-over-time plot for " << pair << " " << nodes;
  std::string g = dom.substr(at, dom.find("</g>", at) - at);
  for (const char* q : {"p50", "p99"}) {
    EXPECT_NE(g.find(std::string("class=\"band\" data-quantile=\"") + q), std::string::npos) << q << " band";
    EXPECT_NE(g.find(std::string("class=\"estimate\" data-quantile=\"") + q), std::string::npos) << q << " line";
  }
  uint64_t tuples = 0;
  for (auto& m : all_matches(g, std::regex(R"re( s, (\d+) tuples: p50 )re"))) tuples += std::stoull(m[1]);
  EXPECT_EQ(std::to_string(tuples), table.at("count")) << pair;
  auto maxes = all_matches(g, std::regex(R"re(data-quantile="max" data-values="([^"]*)")re"));
  ASSERT_EQ(maxes.size(), 1u);
  double top = -1e300;
  std::stringstream vs(maxes[0].str(1));
  for (std::string x; std::getline(vs, x, ',');) top = std::max(top, std::stod(x));
  char b[64];
  snprintf(b, sizeof b, "%.3f", top * 1e6);
  EXPECT_EQ(std::string(b), table.at("max_s")) << pair;
}

}  // namespace

TEST(Report, RendersInChromiumWithTheNumbersOfTheTrace) {
  REQUIRE_CHROMIUM();
  TempDir tmp;
  report_trace().write(tmp / "t");
  auto r =
      run(cptrace_bin() + " report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --pair in,out --period 100", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string dom = self_contained_dom(tmp / "r.html", tmp);
  ASSERT_NE(dom.find("id=\"report\" data-rendered=\"1\""), std::string::npos);

  expect_throughput_matches(dom, tmp / "t", 100, tmp);

  // Latency table: the known durations 100..190 us, 100 tuples each (nearest-rank
  // percentiles), bound = +-60 ticks (the widest correlation bracket), +-61 ns
  // rounded outward over the frequency interval (as `cptrace latency` prints).
  auto lat = dom.substr(dom.find("class=\"lat-stats\""));
  std::map<std::string, std::string> cells;
  for (auto& m : all_matches(lat.substr(0, lat.find("</table>")), std::regex(R"re(data-key="(\w+)">([^<]*)<)re")))
    cells[m[1]] = m[2];
  std::map<std::string, std::string> want = {{"count", "1000"},        {"min_s", "100.000"},    {"p50_s", "140.000"},
                                             {"p90_s", "180.000"},     {"p99_s", "190.000"},    {"max_s", "190.000"},
                                             {"width_p50_s", "0.122"}, {"width_max_s", "0.122"}};
  EXPECT_EQ(cells, want);
  EXPECT_NE(lat.find("local (synth)"), std::string::npos);

  // Histogram bars hold every tuple once; one box per pair.
  uint64_t in_hist = 0;
  auto hist = dom.substr(dom.find("class=\"histogram\""));
  for (auto& m : all_matches(hist.substr(0, hist.find("</svg>")), std::regex(R"re(data-count="(\d+)")re")))
    in_hist += std::stoull(m[1]);
  EXPECT_EQ(in_hist, 1000u);
  EXPECT_EQ(all_matches(dom, std::regex(R"re(<g class="box" data-pair="in -&gt; out")re")).size(), 1u);
  EXPECT_TRUE(std::regex_search(dom, std::regex(R"re(<polyline[^>]*data-pair="in -&gt; out")re")))
      << "no bound-width line";

  // Drops per CPU, and the overview's accounting.
  auto drops = all_matches(dom, std::regex(R"re(data-cpu="(\d+)" data-dropped="(\d+)")re"));
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_EQ(drops[0][2], "0");
  EXPECT_EQ(drops[1][2], "7");
  EXPECT_NE(dom.find("data-key=\"events\">2000<"), std::string::npos);
  EXPECT_NE(dom.find("data-key=\"dropped\">7<"), std::string::npos);
  EXPECT_NE(dom.find("data-key=\"seen\">2007<"), std::string::npos);

  // And it paints: a screenshot of the page is written.
  auto s = run(chromium() + " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                   (tmp / "chromium-profile") + " --window-size=1100,2000 --screenshot=" + (tmp / "r.png") +
                   " file://" + (tmp / "r.html"),
               tmp);
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_TRUE(std::filesystem::exists(tmp / "r.png"));
}

TEST(Report, RecordedWorkloadThroughputMatches) {
  REQUIRE_BPF();
  REQUIRE_CHROMIUM();
  TempDir tmp;
  auto r =
      run(record_cmd(tmp / "t") + " -- " + workload() + " --threads 2 --events 20000 --channels 3 --mode single", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(cptrace_bin() + " report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --period 5", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string dom = rendered_dom(tmp / "r.html", tmp);
  ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos);
  expect_throughput_matches(dom, tmp / "t", 5, tmp);
  EXPECT_NE(dom.find("data-key=\"events\">40003<"), std::string::npos);  // 40000 logs + 3 closes
}

TEST(Report, BadInput) {
  TempDir tmp;
  report_trace().write(tmp / "t");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --pair in", "--pair 'in': expected FROM,TO"},
      {"report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --pair in,nope", "unknown channel 'nope'"},
      {"report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --period 0", "--period 0"},
      {"report " + (tmp / "none") + " -o " + (tmp / "r.html"), "no such file or directory"},
      {"report " + (tmp / "t") + " -o /proc/nope/r.html", "cannot create"},
  };
  for (const auto& c : cases) {
    auto r = run(cptrace_bin() + " " + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
}

// One node's own trace needs no translation: `latency` answers from it, in the
// shape of a translated run's rows (the node paired with itself), and `report
// --pair` shows the same tuples. Known durations 100 + 10 * (i % 10) us at
// exactly 1 GHz; bound +-60 ticks (the widest correlation bracket), in ns
// rounded outward over the frequency interval of the two correlation points.
TEST(Latency, OneNodeTraceWithoutTranslate) {
  TempDir tmp;
  report_trace().write(tmp / "t");
  std::string base = cptrace_bin() + " latency " + (tmp / "t") + " --from in --to out";
  auto r = run(base + " --csv", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "tuple,from_node,to_node,scenario,ticks,ticks_lo,ticks_hi,ns,ns_lo,ns_hi");
  uint64_t rows = 0;
  while (std::getline(in, line)) {
    uint64_t i = std::stoull(line.substr(0, line.find(',')));
    int64_t d = int64_t(100 + 10 * (i % 10)) * 1000;
    EXPECT_EQ(line, fmt::format("{},synth,synth,same-node,{},{},{},{},{},{}", i, d, d - 60, d + 60, d, d - 61, d + 61));
    rows++;
  }
  EXPECT_EQ(rows, 1000u);
  EXPECT_NE(r.err.find("unmatched: 0 tuples on in only, 0 on out only"), std::string::npos) << r.err;

  r = run(base + " --json --memory 16M", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["all"]["count"], 1000);
  EXPECT_EQ(j["all"]["min"], 100000);
  EXPECT_EQ(j["all"]["p50"], 140000);
  EXPECT_EQ(j["all"]["max"], 190000);
  EXPECT_EQ(j["all"]["width_max"], 122);
  ASSERT_EQ(j["hops"].size(), 1u);
  EXPECT_EQ(j["hops"][0]["from_node"], "synth");
  EXPECT_EQ(j["hops"][0]["to_node"], "synth");
  ASSERT_EQ(j["scenarios"].size(), 1u);
  EXPECT_EQ(j["scenarios"][0]["scenario"], "same-node");

  r = run(base, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "latency in -> out: 1000 tuples");
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(value \(all\) +1000 +100000 +140000 +180000 +190000 +190000  ns)")))
      << r.out;

  // The report of the same trace: the same rows, one local series whose table
  // is what `latency --csv` gives; --path works on one node too (its
  // end-to-end row is `latency --json`'s "all").
  std::string csv = run(base + " --csv", tmp).out;
  r = run(cptrace_bin() + " report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --pair in,out --path in,out", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string html = read_file(tmp / "r.html");
  size_t at = html.find("id=\"cptrace-data\">");
  ASSERT_NE(at, std::string::npos);
  at = html.find('>', at) + 1;
  json data = json::parse(html.substr(at, html.find("</script>", at) - at));
  ASSERT_EQ(data["latency"].size(), 1u);
  EXPECT_EQ(data["latency"][0]["summary"]["count"], 1000);
  EXPECT_EQ(data["latency"][0]["from_node"], "synth");
  EXPECT_EQ(data["latency"][0]["remote"], false);
  EXPECT_EQ(data["path"]["end_to_end"]["count"], 1000);
  EXPECT_EQ(data["path"]["end_to_end"]["p50"], 140000);
  EXPECT_EQ(data["path"]["end_to_end"]["p50_lo"], 140000 - 61);
  EXPECT_EQ(data["path"]["end_to_end"]["p50_hi"], 140000 + 61);
  if (!chromium().empty()) {
    std::string dom = self_contained_dom(tmp / "r.html", tmp);
    EXPECT_EQ(latency_rows(dom)["in -&gt; out | local (synth)"], table_from_latency_csv(csv, "synth", "synth"));
    EXPECT_LT(dom.find("<p class=\"end-to-end\""), dom.find("<section class=\"node\""));
  }

  // A directory of several nodes' traces still needs translating.
  std::filesystem::create_directories(tmp / "run");
  report_trace().write(tmp / "run/A");
  report_trace().write(tmp / "run/B");
  for (std::string cmd : {" latency " + (tmp / "run") + " --from in --to out",
                          " report " + (tmp / "run") + " -o " + (tmp / "r2.html") + " --pair in,out"}) {
    r = run(cptrace_bin() + cmd, tmp);
    EXPECT_NE(r.status, 0) << cmd;
    EXPECT_NE(
        r.err.find("not a translated trace (run cptrace translate first): it holds the traces of 2 node(s) (A, B)"),
        std::string::npos)
        << cmd << " -> " << r.err;
  }
}

// A translated 3-node trace (synthetic, tests/synth_cluster.h): the latency table
// of the rendered page must show exactly what `cptrace latency --csv` prints for
// the same pairs (the report reuses its computation), one row per node pair, and
// the bound width over time must be drawn per node pair.
TEST(Report, TranslatedClusterLatencyMatchesLatencyCommand) {
  REQUIRE_CHROMIUM();
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 21);
  cl.asym_ns[{0, 1}] = 120000;
  cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, 6e9L, 50, 250e6L);
  cl.pipeline(1500, 200e6L, 3.5e6L);
  TempDir tmp;
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    cl.write(i, tmp / cl.clock(i).name, 6e9L);
    dirs += " " + (tmp / cl.clock(i).name);
  }
  auto r = run(cptrace_bin() + " translate" + dirs + " --reference A -o " + (tmp / "out"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(cptrace_bin() + " report " + (tmp / "out") + " -o " + (tmp / "r.html") +
              " --pair A.out,B.in --pair B.in,B.out --pair B.out,C.in",
          tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string dom = rendered_dom(tmp / "r.html", tmp);
  ASSERT_NE(dom.find("id=\"report\" data-rendered=\"1\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_EQ(dom.find("<p class=\"js-error\""), std::string::npos);

  auto rows = latency_rows(dom);
  struct Want {
    std::string from, to, from_node, to_node, row;
  } wants[] = {
      {"A.out", "B.in", "A", "B", "A.out -&gt; B.in | remote A -&gt; B"},  // reference-remote
      {"B.in", "B.out", "B", "B", "B.in -&gt; B.out | local (B)"},  // local, not the reference
      {"B.out", "C.in", "B", "C", "B.out -&gt; C.in | remote B -&gt; C"},  // remote-remote-direct
  };
  EXPECT_EQ(rows.size(), 3u);
  for (const Want& w : wants) {
    auto l = run(cptrace_bin() + " latency " + (tmp / "out") + " --from " + w.from + " --to " + w.to + " --csv", tmp);
    ASSERT_EQ(l.status, 0) << l.err;
    auto want = table_from_latency_csv(l.out, w.from_node, w.to_node);
    EXPECT_EQ(want.at("count"), "1500") << w.row;
    ASSERT_TRUE(rows.count(w.row)) << w.row;
    EXPECT_EQ(rows[w.row], want) << w.row;
    // Bound width over time, per node pair.
    EXPECT_TRUE(std::regex_search(dom, std::regex("<polyline[^>]*data-pair=\"" + w.from + " -&gt; " + w.to +
                                                  "\" data-nodes=\"" + w.from_node + " -&gt; " + w.to_node + "\"")))
        << "no bound-width line for " << w.row;
    expect_over_time(dom, w.from + " -&gt; " + w.to, w.from_node + " -&gt; " + w.to_node, want);
  }
  // No node sections without --node-dir, and the page says how to get them.
  EXPECT_EQ(dom.find("<section class=\"node\""), std::string::npos);
  EXPECT_NE(dom.find("give each node's own trace with --node-dir (nodes of this run: A, B, C)"), std::string::npos);
  // The method behind each bound is shown.
  EXPECT_NE(dom.find("reference-remote"), std::string::npos);
  EXPECT_NE(dom.find("remote-remote-direct"), std::string::npos);
  EXPECT_NE(dom.find("local"), std::string::npos);

  // Bad input on a translated trace: an unknown channel is named.
  r = run(cptrace_bin() + " report " + (tmp / "out") + " -o " + (tmp / "r2.html") + " --pair A.out,nope", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown channel \"nope\""), std::string::npos) << r.err;
}

namespace {

// A translated 3-node pipeline A -> B -> C (synthetic, tests/synth_cluster.h),
// each node with its own drops per CPU. Returns the translated directory.
struct TranslatedRun {
  synth::Cluster cl{{{"A", 1.0e15L, 20}, {"B", 1.0e15L + 8.1e9L, 150}, {"C", 1.0e15L - 4.3e9L, -80}}, 33};
  std::string out;
  std::vector<std::string> nodes;
};

void make_run(TranslatedRun& tr, const TempDir& tmp) {
  tr.cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, 6e9L, 50, 250e6L);
  tr.cl.pipeline(1500, 200e6L, 3.5e6L);
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    std::string d = tmp / tr.cl.clock(i).name;
    // Counters per CPU: CPU 0 saw every recorded event (the synthetic events are
    // all on CPU 0) plus 3 * (i + 1) dropped ones; CPU 1 saw 5 + i, all dropped.
    uint64_t n = tr.cl.events(i).size();
    std::vector<uint64_t> seen = {n + 3 * (i + 1), uint64_t(5 + i)}, dropped = {3 * uint64_t(i + 1), uint64_t(5 + i)};
    tr.cl.write(i, d, 6e9L, 16384, [&](TraceWriter& w) {
      w.write(encode_json(FrameType::Counters, json({{"seen", seen}, {"dropped", dropped}}).dump(), 1));
    });
    tr.nodes.push_back(d);
    dirs += " " + d;
  }
  tr.out = tmp / "out";
  auto r = run(cptrace_bin() + " translate" + dirs + " --reference A -o " + tr.out, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
}

// One element of the DOM: from `start` to the first `end` after it.
std::string dom_part(const std::string& dom, const std::string& start, const std::string& end) {
  size_t at = dom.find(start);
  if (at == std::string::npos) return "";
  return dom.substr(at, dom.find(end, at) - at);
}

std::string us3(int64_t ns) {
  char b[64];
  snprintf(b, sizeof b, "%.3f", double(ns) / 1000.0);
  return b;
}

// Nearest-rank percentile (the definition of `cptrace latency`).
int64_t nearest_rank(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::max<size_t>(1, size_t(std::ceil(q * double(v.size())))) - 1];
}

}  // namespace

// `report OUT --node-dir A --node-dir B --node-dir C --path A.out,B.in,B.out,C.in`:
// one page holding every node's throughput (= `cptrace throughput NODE --json`)
// and drops per CPU (= `cptrace info NODE --json`), the per-hop table (=
// `cptrace latency --from X --to Y --json`, whose percentiles are checked against
// its own --csv rows and the truth), and a CDF on a log axis.
TEST(Report, TranslatedRunOnePagePerNodeAndPath) {
  REQUIRE_CHROMIUM();
  TempDir tmp;
  TranslatedRun tr;
  ASSERT_NO_FATAL_FAILURE(make_run(tr, tmp));
  std::string node_args;
  for (const auto& d : tr.nodes) node_args += " --node-dir " + d;
  auto r = run(cptrace_bin() + " report " + tr.out + " -o " + (tmp / "r.html") + node_args +
                   " --period 50 --path A.out,B.in,B.out,C.in --pair A.out,C.in --pair B.in,B.out",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string dom = self_contained_dom(tmp / "r.html", tmp);
  ASSERT_NE(dom.find("id=\"report\" data-rendered=\"1\""), std::string::npos);

  // Every node: its own section, throughput and drops as its own trace says.
  for (size_t i = 0; i < tr.nodes.size(); ++i) {
    std::string name = tr.cl.clock(int(i)).name;
    std::string sec = dom_part(dom, "<section class=\"node\" data-node=\"" + name + "\"", "</section>");
    ASSERT_FALSE(sec.empty()) << "no section for node " << name;
    expect_throughput_matches(sec, tr.nodes[i], 50, tmp);
    auto info = run(cptrace_bin() + " info " + tr.nodes[i] + " --json", tmp);
    ASSERT_EQ(info.status, 0) << info.err;
    json ij = json::parse(info.out);
    std::vector<uint64_t> shown;
    for (auto& m : all_matches(sec, std::regex(R"re(data-cpu="(\d+)" data-dropped="(\d+)")re")))
      shown.push_back(std::stoull(m[2]));
    EXPECT_EQ(shown, ij["dropped_per_cpu"].get<std::vector<uint64_t>>()) << name;
    EXPECT_EQ(shown, (std::vector<uint64_t>{3 * (i + 1), 5 + i})) << name;
    EXPECT_NE(sec.find("data-key=\"dropped\">" + std::to_string(ij["dropped"].get<uint64_t>()) + "<"),
              std::string::npos);
    EXPECT_NE(sec.find("data-key=\"events\">" + std::to_string(ij["events"].get<uint64_t>()) + "<"), std::string::npos)
        << info.out;
    EXPECT_EQ(sec.find("NO: recorded"), std::string::npos) << name;  // events + dropped = seen
  }

  // The question people come with is on top: the end-to-end line, the per-hop
  // table and the pairs' table come before the first node section.
  size_t first_node = dom.find("<section class=\"node\"");
  ASSERT_NE(first_node, std::string::npos);
  for (std::string top : {"<p class=\"end-to-end\"", "<table class=\"path-hops\"", "class=\"lat-stats\""}) {
    ASSERT_NE(dom.find(top), std::string::npos) << top;
    EXPECT_LT(dom.find(top), first_node) << top;
  }
  EXPECT_GT(dom.find("class=\"cdf\""), first_node);  // the plots behind the numbers come after
  std::string e2e = dom_part(dom, "<p class=\"end-to-end\"", "</p>");
  EXPECT_NE(e2e.find("data-count=\"1500\">End to end A.out -&gt; C.in: p50 "), std::string::npos) << e2e;
  EXPECT_NE(e2e.find(" over 1500 tuples"), std::string::npos) << e2e;

  // The nodes' throughput plots share one x axis, the reference's seconds: the
  // same range on every node's plot, and A (the reference) is its own axis.
  std::set<std::pair<std::string, std::string>> ranges;
  for (auto& m :
       all_matches(dom, std::regex(R"re(<svg[^>]*class="throughput"[^>]*data-x0="([^"]+)" data-x1="([^"]+)")re")))
    ranges.insert({m[1], m[2]});
  EXPECT_EQ(all_matches(dom, std::regex(R"re(<svg[^>]*class="throughput")re")).size(), 3u);
  EXPECT_EQ(ranges.size(), 1u) << "every node's plot must have the same x range";
  EXPECT_NE(dom.find("seconds since the trace start of A (the reference)"), std::string::npos);
  {
    std::string html = read_file(tmp / "r.html");
    size_t at = html.find('>', html.find("id=\"cptrace-data\"")) + 1;
    json data = json::parse(html.substr(at, html.find("</script>", at) - at));
    ASSERT_EQ(data["nodes"].size(), 3u);
    EXPECT_EQ(data["nodes"][0]["axis"]["reference"], "A");
    EXPECT_NEAR(data["nodes"][0]["axis"]["scale"].get<double>(), 1.0, 1e-12);
    for (auto& n : data["nodes"]) EXPECT_NEAR(n["axis"]["scale"].get<double>(), 1.0, 1e-3) << n["overview"]["node"];
  }

  // The per-hop table: each row = `cptrace latency --json` of that hop.
  std::string table = dom_part(dom, "<table class=\"path-hops\"", "</table>");
  ASSERT_FALSE(table.empty());
  struct Hop {
    std::string from, to, kind;
  } hops[] = {
      {"A.out", "B.in", "hop"}, {"B.in", "B.out", "hop"}, {"B.out", "C.in", "hop"}, {"A.out", "C.in", "end-to-end"}};
  EXPECT_EQ(all_matches(table, std::regex("<tr data-hop=")).size(), 4u);
  for (const Hop& h : hops) {
    std::string row =
        dom_part(table, "<tr data-hop=\"" + h.from + " -&gt; " + h.to + "\" data-kind=\"" + h.kind + "\"", "</tr>");
    ASSERT_FALSE(row.empty()) << h.from << " -> " << h.to;
    auto l = run(cptrace_bin() + " latency " + tr.out + " --from " + h.from + " --to " + h.to + " --json", tmp);
    ASSERT_EQ(l.status, 0) << l.err;
    json lj = json::parse(l.out)["all"];
    EXPECT_EQ(lj["count"], 1500);
    EXPECT_NE(row.find("data-key=\"count\">1500<"), std::string::npos) << row;
    // --json against its own --csv rows and against the truth of the synthetic tr.
    auto csv = run(cptrace_bin() + " latency " + tr.out + " --from " + h.from + " --to " + h.to + " --csv", tmp);
    std::vector<int64_t> v, lo, hi, truth;
    std::istringstream in(csv.out);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
      v.push_back(std::stoll(f[7])), lo.push_back(std::stoll(f[8])), hi.push_back(std::stoll(f[9]));
      truth.push_back(int64_t(std::llround(tr.cl.truth_ns(h.from, h.to, std::stoull(f[0])))));
    }
    for (const char* q : {"p50", "p90", "p99"}) {
      double p = q == std::string("p50") ? 0.5 : q == std::string("p90") ? 0.9 : 0.99;
      int64_t val = lj[q], l_ = lj[std::string(q) + "_lo"], h_ = lj[std::string(q) + "_hi"];
      EXPECT_EQ(val, nearest_rank(v, p)) << q;
      EXPECT_EQ(l_, nearest_rank(lo, p)) << q;
      EXPECT_EQ(h_, nearest_rank(hi, p)) << q;
      int64_t t = nearest_rank(truth, p);
      EXPECT_LE(l_, t) << h.from << " -> " << h.to << " " << q;
      EXPECT_GE(h_, t) << h.from << " -> " << h.to << " " << q;
      // The page: exact ns in data attributes, us with 3 decimals as text.
      EXPECT_NE(
          row.find("data-key=\"" + std::string(q) + "\" data-ns=\"" + std::to_string(val) + "\">" + us3(val) + "<"),
          std::string::npos)
          << q << " " << row;
      EXPECT_NE(row.find("data-key=\"" + std::string(q) + "_bound\" data-lo-ns=\"" + std::to_string(l_) +
                         "\" data-hi-ns=\"" + std::to_string(h_) + "\">[" + us3(l_) + ", " + us3(h_) + "]<"),
                std::string::npos)
          << q << " " << row;
    }
  }

  // The CDF: an SVG with a log10 axis (decade ticks), one line per latency series.
  std::string cdf = dom_part(dom, "class=\"cdf\"", "</svg>");
  ASSERT_FALSE(cdf.empty());
  EXPECT_TRUE(std::regex_search(dom, std::regex(R"re(<svg[^>]*class="cdf"[^>]*data-xscale="log10")re")));
  std::vector<double> decades;
  for (auto& m : all_matches(cdf, std::regex(R"re(class="xtick" data-us="([0-9.]+)")re")))
    decades.push_back(std::stod(m[1]));
  ASSERT_GE(decades.size(), 2u);
  for (size_t k = 1; k < decades.size(); ++k) EXPECT_DOUBLE_EQ(decades[k], decades[k - 1] * 10);
  // The path's two cross-node hops (its B hop and end to end are --pairs too,
  // plotted once), then A->C remote and B local.
  EXPECT_EQ(all_matches(cdf, std::regex(R"re(<polyline[^>]*data-pair=)re")).size(), 4u);
  EXPECT_TRUE(std::regex_search(cdf, std::regex(R"re(data-pair="A.out -&gt; C.in" data-nodes="A -&gt; C")re")));
  EXPECT_TRUE(std::regex_search(cdf, std::regex(R"re(data-pair="A.out -&gt; B.in" data-nodes="A -&gt; B")re")));
  EXPECT_TRUE(std::regex_search(cdf, std::regex(R"re(data-pair="B.out -&gt; C.in" data-nodes="B -&gt; C")re")));
  // 1500 tuples: every 4th rank (ranks 4, 8, ..., 1500), the maximum included.
  std::vector<std::string> points;
  for (auto& m : all_matches(cdf, std::regex(R"re(data-points="(\d+)")re"))) points.push_back(m[1]);
  EXPECT_EQ(points, (std::vector<std::string>{"375", "375", "375", "375"}));

  // --path alone, as a new user tries it: every hop and the end to end plotted.
  auto p = run(cptrace_bin() + " report " + tr.out + " -o " + (tmp / "p.html") + " --path A.out,B.in,B.out,C.in", tmp);
  ASSERT_EQ(p.status, 0) << p.err;
  std::string pdom = self_contained_dom(tmp / "p.html", tmp);
  EXPECT_EQ(pdom.find("<p class=\"note\">No channel pairs requested"), std::string::npos);
  std::string pcdf = dom_part(pdom, "class=\"cdf\"", "</svg>");
  std::vector<std::string> pairs;
  for (auto& m : all_matches(pcdf, std::regex(R"re(<polyline[^>]*data-pair="([^"]*)")re"))) pairs.push_back(m[1]);
  EXPECT_EQ(pairs,
            (std::vector<std::string>{"A.out -&gt; B.in", "B.in -&gt; B.out", "B.out -&gt; C.in", "A.out -&gt; C.in"}));
  EXPECT_EQ(all_matches(pdom, std::regex(R"re(<g class="box" data-pair=)re")).size(), 4u) << "a box per hop";
  EXPECT_NE(pdom.find("class=\"histogram\""), std::string::npos);

  // And it paints.
  auto s = run(chromium() + " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                   (tmp / "chromium-profile") + " --window-size=1100,4000 --screenshot=" + (tmp / "r.png") +
                   " file://" + (tmp / "r.html"),
               tmp);
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_GT(std::filesystem::file_size(tmp / "r.png"), 10000u);
}

// Nothing dropped: no chart of zero bars, one line with the real numbers.
TEST(Report, NoDropsIsOneLine) {
  REQUIRE_CHROMIUM();
  TempDir tmp;
  SyntheticTrace t = report_trace();
  t.seen = {1000, 1000};
  t.dropped = {0, 0};
  t.write(tmp / "t");
  auto r = run(cptrace_bin() + " report " + (tmp / "t") + " -o " + (tmp / "r.html") + " --period 100", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string dom = self_contained_dom(tmp / "r.html", tmp);
  EXPECT_EQ(dom.find("class=\"drops\""), std::string::npos);
  EXPECT_EQ(dom.find("<h3>Drops per CPU"), std::string::npos);
  EXPECT_EQ(all_matches(dom, std::regex("class=\"no-drops\"")).size(), 1u);
  EXPECT_NE(dom.find("<p class=\"no-drops\" data-events=\"2000\" data-dropped=\"0\">No drops: 2000 events recorded, 0 "
                     "dropped (2000 seen by the probes, 2 CPUs).</p>"),
            std::string::npos)
      << dom_part(dom, "<section class=\"node\"", "</section>");
  // What the node's bounds rest on, in one line (a synthetic trace: no
  // clocksource or TSC verdict recorded, and it says so).
  EXPECT_TRUE(std::regex_search(
      dom, std::regex("<p class=\"note clock-trust\">Clock: clocksource not recorded; skew across CPUs carried: 0 "
                      "ticks; kernel stamps: 0 of \\d+ segments bounded without the model")))
      << dom_part(dom, "<section class=\"node\"", "</section>");
}

TEST(Report, TranslatedRunBadInput) {
  TempDir tmp;
  TranslatedRun tr;
  ASSERT_NO_FATAL_FAILURE(make_run(tr, tmp));
  std::string base = cptrace_bin() + " report " + tr.out + " -o " + (tmp / "r.html");
  std::string all = " --node-dir " + tr.nodes[0] + " --node-dir " + tr.nodes[1] + " --node-dir " + tr.nodes[2];
  report_trace().write(tmp / "other");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {" --path A.out", "--path 'A.out': expected at least two channels"},
      {" --path A.out,nope,C.in", "--path 'A.out,nope,C.in': unknown channel \"nope\""},
      {" --path A.out,,C.in", "--path 'A.out,,C.in': an empty channel name"},
      {" --node-dir " + tr.nodes[0] + " --node-dir " + tr.nodes[1], "no directory for node(s) C of the run"},
      {all + " --node-dir " + tr.nodes[1], "node 'B' given twice"},
      {all + " --node-dir " + (tmp / "other"), "node 'synth' is not a node of the translated run (its nodes: A, B, C)"},
      {" --node-dir " + tr.out, "a translated trace, not a node's own trace"},
      {" --period 50", "--period: a translated trace has no throughput of its own"},
  };
  for (const auto& c : cases) {
    auto r = run(base + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
  // On one node's trace --node-dir is refused by name.
  auto r =
      run(cptrace_bin() + " report " + tr.nodes[0] + " -o " + (tmp / "r.html") + " --node-dir " + tr.nodes[1], tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--node-dir: only for a translated trace"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " latency " + tr.out + " --from A.out --to B.in --json --csv", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;  // CLI11: "--json excludes --csv"
}
