// The analysis commands within a memory budget (issue: analysis at any size):
// on a translated 3-node run of scrambled tuple ids, with repeated and
// unmatched ids, the output with a budget that forces spilling (--memory 16M)
// is byte for byte the output without one, the counts are exact, the spill
// really happened, and the process's peak RSS (getrusage through wait4) stays
// within the budget plus the fixed cost of the same command on a tiny run.
// (GNU time: installed by tools/install-deps.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/latency_series.h"
#include "analyze/report_path.h"
#include "synth_cluster.h"
#include "test_util.h"

using namespace testutil;
using nlohmann::json;

namespace {

uint64_t scramble(uint64_t x) {  // splitmix64's finalizer: a bijection
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Expect {
  uint64_t n = 0, matched = 0, from_only = 0, to_only = 0, from_dups = 0, to_dups = 0;
};

// A -> B -> C, n tuples with scrambled ids over ~5 s: every 97th never reaches
// C.in, every 89th C.in id was never sent (from_only / to_only), every 101st is
// logged twice on A.out and every 103rd twice on C.in.
std::string translated_run(const TempDir& tmp, uint64_t n, Expect& e) {
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 29);
  cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, 6e9L, 50, 250e6L);
  long double period = 5.0e9L / (long double)n;
  e = {};
  e.n = n;
  for (uint64_t k = 0; k < n; ++k) {
    long double t = 200e6L + k * period;
    uint64_t id = scramble(k);
    bool to_reaches = k % 97 != 0, from_sent = k % 89 != 0;
    if (from_sent) cl.event(0, "A.out", id, t);
    if (from_sent && k % 101 == 0) cl.event(0, "A.out", id, t + 10);
    t += cl.delay(0, 1);
    cl.event(1, "B.in", id, t);
    t += 2000;
    cl.event(1, "B.out", id, t);
    t += cl.delay(1, 2);
    if (to_reaches) cl.event(2, "C.in", id, t);
    if (to_reaches && k % 103 == 0) cl.event(2, "C.in", id, t + 10);
    if (from_sent && to_reaches) e.matched++;
    if (from_sent && !to_reaches) e.from_only++;
    if (!from_sent && to_reaches) e.to_only++;
    if (from_sent && k % 101 == 0) e.from_dups++;
    if (to_reaches && k % 103 == 0) e.to_dups++;
  }
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    cl.write(i, tmp / cl.clock(i).name, 6e9L);
    dirs += " " + (tmp / cl.clock(i).name);
  }
  auto r = run(cptrace_bin() + " translate" + dirs + " --reference A -o " + (tmp / "out"), tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  return tmp / "out";
}

// Exit status and peak RSS (KiB) of a command line, stdout/stderr to files. GNU
// time reads the RSS with wait4's rusage; it is a small process, so the figure is
// the command's own (a child forked from this test would start with its RSS).
struct Measured {
  int status = -1;
  long maxrss_kib = 0;
  std::string out, err;
};
Measured measure(const std::string& cmdline, const TempDir& tmp) {
  std::string rss = tmp / "m.rss";
  auto r = run("/usr/bin/time -f %M -o " + rss + " " + cmdline, tmp);
  Measured m;
  m.status = r.status;
  m.out = r.out;
  m.err = r.err;
  m.maxrss_kib = std::stol("0" + read_file(rss));
  return m;
}

class AnalysisBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    dir_ = translated_run(*tmp_, 300000, expect_);
    tiny_tmp_ = new TempDir();
    Expect ignored;
    tiny_ = translated_run(*tiny_tmp_, 2000, ignored);
  }
  static void TearDownTestSuite() {
    delete tmp_;
    delete tiny_tmp_;
  }
  // The budget honoured by `cmd(trace dir, output path)`: on the big run at
  // --memory 16M its peak RSS stays within 16 MB plus the same command's on the
  // 2000-tuple run; with `unbudgeted_too`, the big run without a budget needs
  // more than that, so the assertion can fail. `tag` names the outputs.
  static void expect_budget_honoured(const std::string& tag,
                                     const std::function<std::string(const std::string&, const std::string&)>& cmd,
                                     bool unbudgeted_too = true) {
    const long budget_kib = 16 << 10;
    std::string name = tag;  // a file name for the shell: no spaces
    std::replace(name.begin(), name.end(), ' ', '_');
    Measured fixed = measure(cmd(tiny_, *tiny_tmp_ / ("fixed-" + name)), *tiny_tmp_);
    Measured m = measure(cmd(dir_, *tmp_ / ("budgeted-" + name)) + " --memory 16M", *tmp_);
    ASSERT_EQ(m.status, 0) << m.err;
    long whole_kib = -1;
    if (unbudgeted_too) whole_kib = measure(cmd(dir_, *tmp_ / ("unbudgeted-" + name)), *tmp_).maxrss_kib;
    printf("  [budget] %s: fixed %ld KiB, unbudgeted %ld KiB, --memory 16M %ld KiB\n", tag.c_str(), fixed.maxrss_kib,
           whole_kib, m.maxrss_kib);
    if (unbudgeted_too) {
      EXPECT_GT(whole_kib, fixed.maxrss_kib + budget_kib) << tag << ": the data must not fit the budget unspilled";
    }
    EXPECT_LE(m.maxrss_kib, fixed.maxrss_kib + budget_kib) << tag;
  }
  static TempDir* tmp_;
  static TempDir* tiny_tmp_;
  static std::string dir_, tiny_;
  static Expect expect_;
};
TempDir* AnalysisBudget::tmp_ = nullptr;
TempDir* AnalysisBudget::tiny_tmp_ = nullptr;
std::string AnalysisBudget::dir_, AnalysisBudget::tiny_;
Expect AnalysisBudget::expect_;

constexpr const char* kPair = " --from A.out --to C.in";

TEST_F(AnalysisBudget, LatencySpilledIsByteForByteTheUnbudgetedOutput) {
  for (const char* form : {" --csv", " --json", ""}) {
    std::string cmd = cptrace_bin() + " latency " + dir_ + kPair + form;
    auto whole = run(cmd, *tmp_);
    auto spilled = run(cmd + " --memory 16M", *tmp_);
    ASSERT_EQ(whole.status, 0) << whole.err;
    ASSERT_EQ(spilled.status, 0) << spilled.err;
    EXPECT_EQ(whole.out, spilled.out) << "form" << form;
    EXPECT_EQ(whole.err.find("spilled"), std::string::npos) << whole.err;
    EXPECT_NE(spilled.err.find("spilled"), std::string::npos) << "the 16M run must really spill: " << spilled.err;
  }
  auto j = json::parse(run(cptrace_bin() + " latency " + dir_ + kPair + " --json --memory 16M", *tmp_).out);
  EXPECT_EQ(j["all"]["count"], expect_.matched);
  EXPECT_EQ(j["from_only"], expect_.from_only);
  EXPECT_EQ(j["to_only"], expect_.to_only);
  EXPECT_EQ(j["from_duplicates"], expect_.from_dups);
  EXPECT_EQ(j["to_duplicates"], expect_.to_dups);
}

// `--threads` splits the join's partitions, the decoding and the rows over
// threads: any count gives the same bytes, in memory and spilled, for a pair of
// each kind (reference-remote, remote-remote-direct) and for one node's trace.
// The runs of one form and pair must agree with --threads 1 unbudgeted,
// stderr included (the spill note aside, which names a temp dir).
TEST_F(AnalysisBudget, LatencyIsTheSameBytesOnAnyNumberOfThreads) {
  auto without_note = [](std::string err) {
    size_t at = err.find("note: the tuples did not fit");
    if (at == std::string::npos) return err;
    const size_t line = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
    err.erase(line, err.find('\n', at) + 1 - line);
    return err;
  };
  struct Case {
    std::string dir, pair;
  };
  for (const Case& c :
       {Case{dir_, kPair}, Case{dir_, " --from B.in --to C.in"}, Case{*tmp_ / "B", " --from B.in --to B.out"}})
    for (const char* form : {" --csv", " --json"}) {
      std::string cmd = cptrace_bin() + " latency " + c.dir + c.pair + form;
      auto one = run(cmd + " --threads 1", *tmp_);
      ASSERT_EQ(one.status, 0) << one.err;
      ASSERT_GT(one.out.size(), 1000u) << cmd;
      for (const char* more :
           {" --threads 2", " --threads 3", " --threads 1 --memory 16M", " --threads 2 --memory 16M"}) {
        auto other = run(cmd + more, *tmp_);
        ASSERT_EQ(other.status, 0) << other.err;
        EXPECT_TRUE(other.out == one.out) << cmd << more << ": stdout differs from --threads 1";
        EXPECT_EQ(without_note(other.err), one.err) << cmd << more;
        if (std::string(more).find("--memory") != std::string::npos) {
          EXPECT_NE(other.err.find("spilled"), std::string::npos) << cmd << more << ": must really spill";
        }
      }
    }
}

TEST_F(AnalysisBudget, ThreadsOptionRefusesZero) {
  auto r = run(cptrace_bin() + " latency " + dir_ + kPair + " --threads 0", *tmp_);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
}

// Peak RSS within the budget plus the fixed cost (the same command on a run of
// 2000 tuples); the unbudgeted run of the same data needs more than that, so
// the assertion can fail.
TEST_F(AnalysisBudget, LatencyPeakMemoryStaysWithinTheBudget) {
  for (std::string form : {" --csv", " --json"})
    expect_budget_honoured("latency" + form, [&](const std::string& dir, const std::string&) {
      return cptrace_bin() + " latency " + dir + kPair + form;
    });
}

TEST_F(AnalysisBudget, BadMemorySizesAreRefusedNamingTheValue) {
  for (const char* bad : {"lots", "12X", "1M", "-5G"}) {
    auto r = run(cptrace_bin() + " latency " + tiny_ + kPair + " --memory " + bad, *tiny_tmp_);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.err.find(std::string("--memory")), std::string::npos) << r.err;
  }
}

// The report's latency series (summary, histogram, CDF, bound width over time)
// and its per-hop path table are the same page with and without a budget.
TEST_F(AnalysisBudget, ReportSpilledIsByteForByteTheUnbudgetedPage) {
  const std::string args = " --pair A.out,C.in --pair B.in,B.out --path A.out,B.in,C.in";
  std::string cmd = cptrace_bin() + " report " + dir_ + args;
  auto whole = run(cmd + " -o " + (*tmp_ / "whole.html"), *tmp_);
  auto spilled = run(cmd + " -o " + (*tmp_ / "spilled.html") + " --memory 16M", *tmp_);
  ASSERT_EQ(whole.status, 0) << whole.err;
  ASSERT_EQ(spilled.status, 0) << spilled.err;
  std::string a = read_file(*tmp_ / "whole.html"), b = read_file(*tmp_ / "spilled.html");
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "the pages differ";
  EXPECT_NE(a.find("\"count\":" + std::to_string(expect_.matched)), std::string::npos);
  expect_budget_honoured("report", [&](const std::string& dir, const std::string& out) {
    return cptrace_bin() + " report " + dir + args + " -o " + out;
  });
}

// The report reads all its channel pairs together (latency_streams, one read
// of the trace, the budget shared among them): each pair's rows, counts,
// series and path hops are exactly those of the pair read alone, with the
// whole budget, unspilled; a pair asked twice comes out twice.
TEST_F(AnalysisBudget, ReportPairsReadTogetherEqualEachPairReadAlone) {
  using namespace cptrace;
  TraceReader r(dir_);
  const std::vector<ChannelPair> pairs = {{"A.out", "B.in"}, {"B.in", "C.in"},  {"A.out", "C.in"},
                                          {"B.in", "B.out"}, {"C.in", "A.out"}, {"A.out", "C.in"}};
  MemoryBudget small;
  small.bytes = 16 << 20;
  std::vector<LatencyResult> together = latency_streams(r, pairs, small);
  ASSERT_EQ(together.size(), pairs.size());
  EXPECT_GT(together[2].partitions, 1u) << "the shared budget must make the joins spill";
  using Row = std::tuple<uint64_t, uint16_t, uint16_t, std::string, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t>;
  auto rows_of = [](const LatencyResult& res) {
    std::vector<Row> out;
    res.for_each_row([&](const LatencyRow& x) {
      out.emplace_back(x.tuple, x.from_node, x.to_node, x.scenario, x.ticks, x.ticks_lo, x.ticks_hi, x.ns, x.ns_lo,
                       x.ns_hi, x.from_ref);
    });
    return out;
  };
  auto series_json = [](const std::vector<LatencySeries>& ss) {
    json j = json::array();
    for (const LatencySeries& s : ss)
      j.push_back({s.from_channel, s.to_channel, s.from_node, s.to_node, s.remote, s.method, s.unmatched_from,
                   s.unmatched_to, s.duplicates, summary_json(s.summary), s.histogram, s.cdf, s.width_over_time});
    return j;
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [from, to] = pairs[i];
    LatencyResult alone = latency_stream(r, from, to, MemoryBudget{});
    EXPECT_EQ(alone.partitions, 1u);
    const LatencyResult& t = together[i];
    EXPECT_EQ(t.row_count, alone.row_count) << from << " -> " << to;
    EXPECT_EQ(std::tie(t.from_only, t.to_only, t.from_duplicates, t.to_duplicates),
              std::tie(alone.from_only, alone.to_only, alone.from_duplicates, alone.to_duplicates));
    EXPECT_TRUE(rows_of(t) == rows_of(alone)) << from << " -> " << to << ": the rows differ";
    EXPECT_EQ(series_json(latency_series(r, from, to, t, small)).dump(),
              series_json(latency_series(r, from, to, MemoryBudget{})).dump())
        << from << " -> " << to;
  }
  EXPECT_EQ(together[2].row_count, expect_.matched);
  // Handed on one at a time (the report's form): the same rows and counts,
  // each index once, in memory (the default budget) and spilled.
  for (const MemoryBudget& b : {MemoryBudget{}, small}) {
    std::vector<int> seen(pairs.size());
    latency_streams(r, pairs, b, [&](size_t i, const LatencyResult& t) {
      ASSERT_LT(i, pairs.size());
      ++seen[i];
      EXPECT_EQ(t.row_count, together[i].row_count);
      EXPECT_EQ(
          std::tie(t.from_only, t.to_only, t.from_duplicates, t.to_duplicates),
          std::tie(together[i].from_only, together[i].to_only, together[i].from_duplicates, together[i].to_duplicates));
      EXPECT_TRUE(rows_of(t) == rows_of(together[i])) << pairs[i].first << " -> " << pairs[i].second;
    });
    EXPECT_EQ(seen, std::vector<int>(pairs.size(), 1)) << b.bytes;
  }
  const std::string path = "A.out,B.in,B.out,C.in";
  std::vector<LatencyResult> hops = latency_streams(r, path_pairs(path), small);
  EXPECT_EQ(path_breakdown(path, hops).dump(), path_breakdown(r, path, MemoryBudget{}).dump());
}

// export table: the same files (zstd is deterministic for the same text) with
// and without a budget, and the budget honoured.
TEST_F(AnalysisBudget, ExportTableSpilledWritesTheSameFiles) {
  const std::string args = " --pair A.out,C.in --pair B.in,B.out";
  auto whole = run(cptrace_bin() + " export table " + dir_ + args + " -o " + (*tmp_ / "xw"), *tmp_);
  auto spilled = run(cptrace_bin() + " export table " + dir_ + args + " -o " + (*tmp_ / "xs") + " --memory 16M", *tmp_);
  ASSERT_EQ(whole.status, 0) << whole.err;
  ASSERT_EQ(spilled.status, 0) << spilled.err;
  for (const char* f : {"latency.csv.zst", "events.csv.zst"}) {
    std::string a = read_file(*tmp_ / (std::string("xw/") + f)), b = read_file(*tmp_ / (std::string("xs/") + f));
    ASSERT_GT(a.size(), 1000u) << f;
    EXPECT_TRUE(a == b) << f << " differs";
  }
  expect_budget_honoured("export table", [&](const std::string& dir, const std::string& out) {
    return cptrace_bin() + " export table " + dir + args + " -o " + out;
  });
}

// export table: the events table is made on every thread, runs of frames at
// a time, and with --pair both Parquet tables at once; every file is the same
// bytes on 1, 2 and 3 threads, Parquet and .csv.zst.
TEST_F(AnalysisBudget, ExportTableIsTheSameFilesOnAnyNumberOfThreads) {
  for (const std::string form : {" --parquet", ""}) {
    std::map<std::string, std::string> first;
    for (const char* threads : {"1", "2", "3"}) {
      const std::string out = *tmp_ / ("threads" + std::string(threads) + (form.empty() ? "csv" : "pq"));
      auto r = run(cptrace_bin() + " export table " + dir_ + " --pair A.out,C.in" + form + " --threads " + threads +
                       " -o " + out,
                   *tmp_);
      ASSERT_EQ(r.status, 0) << r.err;
      for (const auto& e : fs::directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        SCOPED_TRACE(out + "/" + name);
        const std::string bytes = read_file(e.path());
        EXPECT_GT(bytes.size(), 100000u);
        if (first.count(name)) {
          EXPECT_TRUE(bytes == first[name]) << "differs from the file of 1 thread";
        } else {
          first[name] = bytes;
        }
      }
    }
    EXPECT_EQ(first.size(), 2u);
  }
}

// export table --parquet: the writer's pages and row group take their share of
// the budget (ParquetWriter::shape_for), the latency join the rest.
TEST_F(AnalysisBudget, ExportTableParquetHonoursTheBudget) {
  const std::string args = " --pair A.out,C.in --pair B.in,B.out --parquet";
  expect_budget_honoured("export table parquet", [&](const std::string& dir, const std::string& out) {
    return cptrace_bin() + " export table " + dir + args + " -o " + out;
  });
}

// One node's own trace (no translation): the report's same-node series pairs
// through the same join, the same page with and without a budget.
TEST_F(AnalysisBudget, NodeTraceReportSpilledIsTheSamePage) {
  std::string node = *tmp_ / "B";
  std::string cmd = cptrace_bin() + " report " + node + " --pair B.in,B.out";
  auto whole = run(cmd + " -o " + (*tmp_ / "nw.html"), *tmp_);
  auto spilled = run(cmd + " -o " + (*tmp_ / "ns.html") + " --memory 16M", *tmp_);
  ASSERT_EQ(whole.status, 0) << whole.err;
  ASSERT_EQ(spilled.status, 0) << spilled.err;
  std::string a = read_file(*tmp_ / "nw.html"), b = read_file(*tmp_ / "ns.html");
  EXPECT_TRUE(a == b) << "the pages differ";
  EXPECT_NE(a.find("\"count\":" + std::to_string(expect_.n)), std::string::npos) << "every tuple passes B";
  expect_budget_honoured(
      "node report",
      [&](const std::string& dir, const std::string& out) {
        std::string node_dir = (dir == dir_ ? *tmp_ : *tiny_tmp_) / "B";  // B's own trace, untranslated
        return cptrace_bin() + " report " + node_dir + " --pair B.in,B.out -o " + out;
      },
      false);
}

// `latency` on one node's own trace (no translation): the same within
// --memory as without, spilled, and within the budget.
TEST_F(AnalysisBudget, NodeTraceLatencySpilledIsTheSameOutputWithinBudget) {
  std::string cmd = cptrace_bin() + " latency " + (*tmp_ / "B") + " --from B.in --to B.out --csv";
  auto whole = run(cmd, *tmp_);
  auto spilled = run(cmd + " --memory 16M", *tmp_);
  ASSERT_EQ(whole.status, 0) << whole.err;
  ASSERT_EQ(spilled.status, 0) << spilled.err;
  EXPECT_TRUE(whole.out == spilled.out) << "the outputs differ";
  EXPECT_EQ(uint64_t(std::count(whole.out.begin(), whole.out.end(), '\n')), expect_.n + 1) << "every tuple passes B";
  EXPECT_NE(spilled.err.find("spilled"), std::string::npos) << "the 16M run must really spill: " << spilled.err;
  expect_budget_honoured(
      "node latency",
      [&](const std::string& dir, const std::string&) {
        std::string node_dir = (dir == dir_ ? *tmp_ : *tiny_tmp_) / "B";  // B's own trace, untranslated
        return cptrace_bin() + " latency " + node_dir + " --from B.in --to B.out --csv";
      },
      false);
}

}  // namespace
