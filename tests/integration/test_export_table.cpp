// `cptrace export table` on a translated 3-node trace (tests/synth_cluster.h):
// the documented DuckDB query (tools/duckdb/examples/hop_p99.sql, run through
// tools/duckdb/query.mjs with node) must give, per hop, exactly the count,
// p50, p99, their bounds and the p99 bound width of `cptrace latency --json`.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "synth_cluster.h"
#include "test_util.h"

using namespace testutil;
using nlohmann::json;

namespace {

std::string duckdb_dir() { return (source_dir() / "tools" / "duckdb").string(); }

#define REQUIRE_DUCKDB()                                                                                    \
  do {                                                                                                      \
    if (system("command -v node >/dev/null 2>&1") != 0)                                                     \
      GTEST_SKIP() << "SKIPPED: node is not installed (tools/install-deps.sh installs nodejs)";             \
    if (!fs::exists(duckdb_dir() + "/node_modules/@duckdb/node-api/package.json"))                          \
      GTEST_SKIP() << "SKIPPED: @duckdb/node-api is not in tools/duckdb/node_modules (tools/install-deps.sh " \
                      "runs npm ci there)";                                                                 \
  } while (0)

// A 3-node pipeline A -> B -> C translated onto A. With B-C rounds the B.out ->
// C.in hop is remote-remote-direct, without them remote-remote-via-reference.
std::string translated_cluster(const TempDir& tmp, bool bc_rounds) {
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 21);
  cl.asym_ns[{0, 1}] = 120000;
  std::vector<std::pair<int, int>> pairs{{0, 1}, {1, 0}, {0, 2}, {2, 0}};
  if (bc_rounds) pairs.insert(pairs.end(), {{1, 2}, {2, 1}});
  cl.sync_all(pairs, 6e9L, 50, 250e6L);
  cl.pipeline(1500, 200e6L, 3.5e6L);
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    cl.write(i, tmp / cl.clock(i).name, 6e9L);
    dirs += " " + (tmp / cl.clock(i).name);
  }
  auto r = run(cptrace_bin() + " translate" + dirs + " --reference A -o " + (tmp / "out"), tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  return tmp / "out";
}

json duckdb(const std::string& dir, const std::string& sql, const TempDir& tmp) {
  auto r = run("node " + duckdb_dir() + "/query.mjs " + dir + " \"" + sql + "\"", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);
}

const char* kPairs[][2] = {{"A.out", "B.in"}, {"B.in", "B.out"}, {"B.out", "C.in"}, {"A.out", "C.in"}};

void expect_sql_equals_latency(bool bc_rounds, const char* bc_scenario) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, bc_rounds);
  std::string pairs;
  for (auto& p : kPairs) pairs += std::string(" --pair ") + p[0] + "," + p[1];
  auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "tbl") + pairs, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json hops = duckdb(tmp / "tbl", source_dir() / "tools/duckdb/examples/hop_p99.sql", tmp);
  ASSERT_EQ(hops.size(), 4u) << hops.dump();
  for (auto& p : kPairs) {
    auto l = run(cptrace_bin() + " latency " + out + " --from " + p[0] + " --to " + p[1] + " --json", tmp);
    ASSERT_EQ(l.status, 0) << l.err;
    json want = json::parse(l.out);
    ASSERT_EQ(want["hops"].size(), 1u) << l.out;
    const json& w = want["hops"][0];
    json got;
    for (const json& h : hops)
      if (h["from_channel"] == p[0] && h["to_channel"] == p[1]) got = h;
    ASSERT_FALSE(got.is_null()) << p[0] << " -> " << p[1] << " missing in " << hops.dump();
    SCOPED_TRACE(std::string(p[0]) + " -> " + p[1] + ": sql " + got.dump() + " latency " + w.dump());
    EXPECT_EQ(w["count"], 1500);
    for (const char* k : {"from_node", "to_node", "count", "p50", "p50_lo", "p50_hi", "p99", "p99_lo", "p99_hi",
                          "width_p99"})
      EXPECT_EQ(got[k], w[k]) << k;
    // Not a degenerate case: a real bound around the percentile.
    EXPECT_LT(w["p99_lo"].get<int64_t>(), w["p99_hi"].get<int64_t>());
    EXPECT_LE(w["p99_lo"].get<int64_t>(), w["p99"].get<int64_t>());
    EXPECT_LE(w["p99"].get<int64_t>(), w["p99_hi"].get<int64_t>());
    if (std::string(p[0]) == "B.out") {
      EXPECT_EQ(want["scenarios"][0]["scenario"], bc_scenario);
    }
  }
  // events.csv: every event, and the reference-remote bounds redone in SQL from
  // the events' instant bounds equal latency.csv's for every tuple.
  json n = duckdb(tmp / "tbl", "SELECT count(*) AS n, count(DISTINCT node) AS nodes FROM events", tmp);
  EXPECT_EQ(n[0]["n"], 4 * 1500);
  EXPECT_EQ(n[0]["nodes"], 3);
  json m = duckdb(tmp / "tbl",
                  "SELECT count(*) AS n, count(*) FILTER (WHERE l.ticks_lo <> b.ref_lo - a.ref_hi OR "
                  "l.ticks_hi <> b.ref_hi - a.ref_lo OR l.ticks <> b.ref_ts - a.ref_ts) AS differ "
                  "FROM latency l JOIN events a ON a.channel = l.from_channel AND a.tuple = l.tuple "
                  "JOIN events b ON b.channel = l.to_channel AND b.tuple = l.tuple "
                  "WHERE l.scenario = 'reference-remote'",
                  tmp);
  EXPECT_EQ(m[0]["n"], 2 * 1500);
  EXPECT_EQ(m[0]["differ"], 0);
}

}  // namespace

TEST(ExportTable, DuckDbHopP99EqualsLatencyWithDirectRounds) {
  REQUIRE_DUCKDB();
  expect_sql_equals_latency(true, "remote-remote-direct");
}

TEST(ExportTable, DuckDbHopP99EqualsLatencyViaReference) {
  REQUIRE_DUCKDB();
  expect_sql_equals_latency(false, "remote-remote-via-reference");
}

// Bad input: an untranslated trace, a malformed --pair, an unknown channel, an
// existing export; each named, non-zero exit, nothing half-written.
TEST(ExportTable, BadInputIsNamed) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  struct Case {
    std::string args, needle;
  } cases[] = {
      {" export table " + (tmp / "A") + " -o " + (tmp / "t1"), "not a translated trace"},
      {" export table " + out + " -o " + (tmp / "t2") + " --pair A.out", "--pair 'A.out': expected FROM,TO"},
      {" export table " + out + " -o " + (tmp / "t3") + " --pair A.out,nope", "unknown channel \"nope\""},
      {" export csv " + out + " -o " + (tmp / "t4.csv") + " --pair A.out,B.in", "--pair applies to export table only"},
  };
  for (const Case& c : cases) {
    auto r = run(cptrace_bin() + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp / "t3" + "/events.csv"));
  auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "t5" + "/latency.csv"));  // no --pair, no latency table
  r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("t5"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5") + " -f", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(ExportTable, QueryScriptRefusesANonExport) {
  REQUIRE_DUCKDB();
  TempDir tmp;
  auto r = run("node " + duckdb_dir() + "/query.mjs " + tmp.path.string() + " 'SELECT 1'", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no events.csv"), std::string::npos) << r.err;
}
