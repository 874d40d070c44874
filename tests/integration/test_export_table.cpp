// `cptrace export table` on a translated 3-node trace (tests/synth_cluster.h):
// the documented DuckDB query (tools/duckdb/examples/hop_p99.sql, run through
// tools/duckdb/query.mjs with node) on the zstd-compressed tables as they are
// must give, per hop, exactly the count, p50, p99, their bounds and the p99
// bound width of `cptrace latency --json`; decompressed, the tables are the
// --plain ones byte for byte, and their rows those of `dump` and `latency --csv`.
// The same query on the Parquet export (tools/duckdb/export-parquet.mjs, cptrace
// streaming into DuckDB through a named pipe) gives the same numbers.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tables/parquet_writer.h"
#include "synth_cluster.h"
#include "test_util.h"
#include "zstd_util.h"

using namespace testutil;
using nlohmann::json;

namespace {

std::string duckdb_dir() { return (source_dir() / "tools" / "duckdb").string(); }

#define REQUIRE_DUCKDB()                                                                                      \
  do {                                                                                                        \
    if (system("command -v node >/dev/null 2>&1") != 0)                                                       \
      GTEST_SKIP() << "SKIPPED: node is not installed (tools/install-deps.sh installs nodejs)";               \
    if (!fs::exists(duckdb_dir() + "/node_modules/@duckdb/node-api/package.json"))                            \
      GTEST_SKIP() << "SKIPPED: @duckdb/node-api is not in tools/duckdb/node_modules (tools/install-deps.sh " \
                      "runs npm ci there)";                                                                   \
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

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    v.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return v;
}

// The fields `cols` of a CSV line (no quoted fields here), joined by commas.
std::string project(const std::string& line, const std::vector<size_t>& cols) {
  std::vector<std::string> f;
  for (size_t at = 0;;) {
    size_t comma = line.find(',', at);
    f.push_back(line.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  std::string out;
  for (size_t c : cols) out += (out.empty() ? "" : ",") + f.at(c);
  return out;
}

const char* kPairs[][2] = {{"A.out", "B.in"}, {"B.in", "B.out"}, {"B.out", "C.in"}, {"A.out", "C.in"}};

// export-parquet.mjs with its temporary directory under `tmpdir` (TMPDIR), so
// that a test sees whether it is gone afterwards.
RunResult export_parquet(const std::string& args, const std::string& tmpdir, const TempDir& tmp) {
  fs::create_directories(tmpdir);
  return run(
      "TMPDIR=" + tmpdir + " node " + duckdb_dir() + "/export-parquet.mjs --cptrace " + cptrace_bin() + " " + args,
      tmp);
}

void expect_sql_equals_latency(bool bc_rounds, const char* bc_scenario, bool parquet = false) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, bc_rounds);
  std::string pairs;
  for (auto& p : kPairs) pairs += std::string(" --pair ") + p[0] + "," + p[1];
  if (parquet) {
    auto r = export_parquet(out + " " + (tmp / "tbl") + pairs, tmp / "nodetmp", tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("6000 events"), std::string::npos) << r.err;
    // Only the Parquet tables: no CSV was stored on the way, and the pipes' directory is gone.
    EXPECT_EQ(listing(tmp / "tbl"), (std::set<std::string>{"events.parquet", "latency.parquet"}));
    EXPECT_EQ(listing(tmp / "nodetmp"), std::set<std::string>{});
  } else {
    auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "tbl") + pairs, tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    // DuckDB reads the compressed files: there is nothing else to read.
    EXPECT_EQ(listing(tmp / "tbl"), (std::set<std::string>{"events.csv.zst", "latency.csv.zst"}));
  }
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
    for (const char* k :
         {"from_node", "to_node", "count", "p50", "p50_lo", "p50_hi", "p99", "p99_lo", "p99_hi", "width_p99"})
      EXPECT_EQ(got[k], w[k]) << k;
    // Not a degenerate case: a real bound around the percentile.
    EXPECT_LT(w["p99_lo"].get<int64_t>(), w["p99_hi"].get<int64_t>());
    EXPECT_LE(w["p99_lo"].get<int64_t>(), w["p99"].get<int64_t>());
    EXPECT_LE(w["p99"].get<int64_t>(), w["p99_hi"].get<int64_t>());
    if (std::string(p[0]) == "B.out") {
      EXPECT_EQ(want["scenarios"][0]["scenario"], bc_scenario);
    }
  }
  // events: every event, and the reference-remote bounds redone in SQL from
  // the events' instant bounds equal the latency table's for every tuple.
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

TEST(ExportTable, ParquetHopP99EqualsLatency) {
  REQUIRE_DUCKDB();
  expect_sql_equals_latency(true, "remote-remote-direct", true);
}

// The min/max statistics of a Parquet file's column chunks (cptrace's writer),
// as DuckDB reads them (parquet_metadata), against the SQL min and max of the
// rows of each row group, and the null counts: for every row group of every
// column in `cols` (integers in signed or unsigned order as their type, booleans).
void expect_stats_are_the_rows(const std::string& file, const std::vector<std::string>& cols, const TempDir& tmp) {
  std::string in, got;
  for (const std::string& c : cols) {
    in += std::string(in.empty() ? "" : ", ") + "'" + c + "'";
    got += std::string(got.empty() ? "" : " UNION ALL ") + "SELECT g, '" + c + "' AS c, min(" + c +
           ")::VARCHAR AS lo, max(" + c + ")::VARCHAR AS hi, count(*) - count(" + c +
           ") AS nc FROM rows JOIN groups ON file_row_number >= first AND file_row_number < first + n GROUP BY g";
  }
  const std::string sql =
      "WITH md AS (SELECT row_group_id AS g, path_in_schema AS c, stats_min_value AS lo, stats_max_value AS hi, "
      "stats_null_count AS nc, sum(row_group_num_rows) OVER (PARTITION BY path_in_schema ORDER BY row_group_id) - "
      "row_group_num_rows AS first, row_group_num_rows AS n FROM parquet_metadata('" +
      file + "') WHERE path_in_schema IN (" + in +
      ")), groups AS (SELECT DISTINCT g, first, n FROM md), rows AS (SELECT * FROM read_parquet('" + file +
      "', file_row_number = true)), got AS (" + got +
      ") SELECT count(*) AS chunks, count(*) FILTER (WHERE md.lo IS NOT DISTINCT FROM got.lo AND md.hi IS NOT "
      "DISTINCT FROM got.hi AND md.nc = got.nc) AS same, (SELECT count(DISTINCT g) FROM md) AS groups, "
      "string_agg(md.c || ' ' || md.g || ': ' || coalesce(md.lo, 'NULL') || '..' || coalesce(md.hi, 'NULL') || "
      "' vs ' || coalesce(got.lo, 'NULL') || '..' || coalesce(got.hi, 'NULL'), '; ') FILTER (WHERE md.lo IS "
      "DISTINCT FROM got.lo OR md.hi IS DISTINCT FROM got.hi OR md.nc <> got.nc) AS differ FROM md JOIN got USING "
      "(g, c)";
  json r = duckdb(fs::path(file).parent_path(), sql, tmp);
  ASSERT_EQ(r.size(), 1u);
  SCOPED_TRACE(file + ": " + r.dump());
  EXPECT_EQ(r[0]["chunks"], r[0]["groups"].get<uint64_t>() * cols.size());
  EXPECT_GT(r[0]["groups"], 0);
  EXPECT_EQ(r[0]["same"], r[0]["chunks"]);
}

// `export table --parquet` (cptrace's own writer, parquet_writer.h) against
// the CSV export of the same trace, read by DuckDB: the same rows (EXCEPT ALL
// both ways, and the counts) and the column types of export-parquet.mjs's
// files (DuckDB's own writer). Again on the trace without a measured frequency
// (meta.json's interval removed), where the ns columns are NULL on every row.
void expect_parquet_is_the_csv(const std::string& trace, const TempDir& tmp, const std::string& tag, bool have_ns) {
  SCOPED_TRACE(tag);
  std::string pairs;
  for (auto& p : kPairs) pairs += std::string(" --pair ") + p[0] + "," + p[1];
  const std::string csv = tmp / (tag + "-csv"), pq = tmp / (tag + "-pq"), old = tmp / (tag + "-old");
  auto r = run(cptrace_bin() + " export table " + trace + " -o " + csv + pairs, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(cptrace_bin() + " export table " + trace + " -o " + pq + pairs + " --parquet", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(pq + "/events.parquet"), std::string::npos) << r.err;
  EXPECT_EQ(listing(pq), (std::set<std::string>{"events.parquet", "latency.parquet"}));
  r = export_parquet(trace + " " + old + pairs, tmp / "nodetmp", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string table : {"events", "latency"}) {
    const std::string mine = "read_parquet('" + pq + "/" + table + ".parquet')";
    const std::string duck = "read_parquet('" + old + "/" + table + ".parquet')";
    json n = duckdb(csv,
                    "SELECT (SELECT count(*) FROM " + table + ") AS csv, (SELECT count(*) FROM " + mine +
                        ") AS pq, (SELECT count(*) FROM (SELECT * FROM " + table + " EXCEPT ALL SELECT * FROM " + mine +
                        ")) AS only_csv, (SELECT count(*) FROM (SELECT * FROM " + mine + " EXCEPT ALL SELECT * FROM " +
                        table + ")) AS only_pq",
                    tmp);
    SCOPED_TRACE(table + ": " + n.dump());
    EXPECT_EQ(n[0]["csv"], 4 * 1500);  // events: 4 channels; latency: 4 pairs of 1500 tuples
    EXPECT_EQ(n[0]["pq"], n[0]["csv"]);
    EXPECT_EQ(n[0]["only_csv"], 0);
    EXPECT_EQ(n[0]["only_pq"], 0);
    const std::string types =
        "SELECT string_agg(column_name || ' ' || column_type, ', ') AS t FROM (DESCRIBE SELECT * FROM ";
    EXPECT_EQ(duckdb(csv, types + mine + ")", tmp)[0]["t"], duckdb(csv, types + duck + ")", tmp)[0]["t"]);
    const std::string ns = table == "events" ? "time_ns" : "ns";
    json nulls = duckdb(csv, "SELECT count(" + ns + ") AS set FROM " + mine, tmp);
    EXPECT_EQ(nulls[0]["set"], have_ns ? n[0]["pq"] : json(0));
  }
  expect_stats_are_the_rows(pq + "/events.parquet",
                            {"reference", "tuple", "pid", "tid", "cpu", "local_ts", "ref_ts", "ref_lo", "ref_hi",
                             "time_ns", "time_lo_ns", "time_hi_ns"},
                            tmp);
  expect_stats_are_the_rows(pq + "/latency.parquet",
                            {"tuple", "remote", "from_ref_ts", "ticks", "ticks_lo", "ticks_hi", "ns", "ns_lo", "ns_hi"},
                            tmp);
}

TEST(ExportTable, CptraceParquetHasTheRowsAndTypesOfTheCsvExport) {
  REQUIRE_DUCKDB();
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  expect_parquet_is_the_csv(out, tmp, "ns", true);
  // No frequency interval: what latency and export test to leave the ns columns empty.
  json meta = json::parse(read_file(out + "/meta.json"));
  ASSERT_TRUE(meta["translated"]["frequency"].contains("hz_lo"));
  meta["translated"]["frequency"].erase("hz_lo");
  meta["translated"]["frequency"].erase("hz_hi");
  {
    std::ofstream f(out + "/meta.json");
    f << meta.dump();
  }
  expect_parquet_is_the_csv(out, tmp, "nons", false);
}

// The writer on values at the ends of every type and across pages and row
// groups (small ones here: 1024-row pages, two a group), read back by DuckDB:
// the deltas wrap around as the format says, dictionaries grow across row
// groups, the statistics are those of the rows, and an empty table is a valid
// file.
TEST(ExportTable, ParquetWriterRoundTripsExtremeValues) {
  REQUIRE_DUCKDB();
  TempDir tmp;
  using K = cptrace::ParquetWriter::Kind;
  const uint64_t n = 5000;
  auto value = [](uint64_t i) -> uint64_t {
    switch (i % 7) {
      case 0:
        return 0;
      case 1:
        return ~0ull;  // UINT64_MAX, INT64 -1
      case 2:
        return 1ull << 63;  // INT64_MIN
      case 3:
        return (1ull << 63) - 1;  // INT64_MAX
      default:
        return i * 0x9e3779b97f4a7c15ull;  // scattered
    }
  };
  {
    fs::create_directories(tmp / "w");
    cptrace::OutFile f(tmp / "w/events.parquet");
    cptrace::ParquetWriter w(f,
                             {{"u64", K::UInt64},
                              {"i64", K::Int64},
                              {"u32", K::UInt32},
                              {"u16", K::UInt16},
                              {"b", K::Bool},
                              {"s", K::String},
                              {"none", K::Int64, true}},
                             true, {1024, 2048});
    for (uint64_t i = 0; i < n; ++i) {
      w.put_int(0, int64_t(value(i)));
      w.put_int(1, int64_t(value(i)));
      w.put_int(2, uint32_t(value(i)));
      w.put_int(3, uint16_t(value(i)));
      w.put_bool(4, i % 3 == 0);
      // A new string every 1000 rows: the dictionary grows across row groups.
      w.put_code(5, w.code(5, i % 2 ? "odd, it's" : "even-" + std::to_string(i / 1000)));
      w.end_row();
    }
    w.close();
  }
  {
    fs::create_directories(tmp / "e");
    cptrace::OutFile f(tmp / "e/events.parquet");
    cptrace::ParquetWriter w(f, {{"u64", K::UInt64}, {"s", K::String}}, false, {});
    w.close();
  }
  // The expected values, computed here, against those read.
  uint64_t sum_u64_mod = 0, sum_i64_mod = 0, sum_u32 = 0, sum_u16 = 0, trues = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum_u64_mod = (sum_u64_mod + value(i) % 1000003) % 1000003;
    sum_i64_mod = (sum_i64_mod + uint64_t(((int64_t(value(i)) % 1000003) + 1000003) % 1000003)) % 1000003;
    sum_u32 += uint32_t(value(i));
    sum_u16 += uint16_t(value(i));
    trues += i % 3 == 0;
  }
  json got = duckdb(tmp / "w",
                    "SELECT count(*) AS n, sum(u64 % 1000003) % 1000003 AS u64, sum(((i64 % 1000003) + 1000003) % "
                    "1000003) % 1000003 AS i64, sum(u32) AS u32, sum(u16) AS u16, count(*) FILTER (WHERE b) AS t, "
                    "count(DISTINCT s) AS s, count(*) FILTER (WHERE s = 'odd, it''s') AS odd, "
                    "count(none) AS none, max(u64) AS max_u64, min(i64) AS min_i64, max(i64) AS max_i64 FROM events",
                    tmp);
  ASSERT_EQ(got.size(), 1u);
  SCOPED_TRACE(got.dump());
  EXPECT_EQ(got[0]["n"], n);
  EXPECT_EQ(got[0]["u64"].dump(), json(sum_u64_mod).dump());
  EXPECT_EQ(got[0]["i64"].dump(), json(sum_i64_mod).dump());
  EXPECT_EQ(got[0]["u32"].dump(), json(sum_u32).dump());
  EXPECT_EQ(got[0]["u16"].dump(), json(sum_u16).dump());
  EXPECT_EQ(got[0]["t"], trues);
  EXPECT_EQ(got[0]["s"], 6);  // even-0 .. even-4 and the odd one
  EXPECT_EQ(got[0]["odd"], n / 2);
  EXPECT_EQ(got[0]["none"], 0);
  EXPECT_EQ(got[0]["max_u64"].dump(), "\"18446744073709551615\"");
  EXPECT_EQ(got[0]["min_i64"].dump(), "\"-9223372036854775808\"");
  EXPECT_EQ(got[0]["max_i64"].dump(), "\"9223372036854775807\"");
  // Every row group's statistics: unsigned order for u64 and u32 (whose
  // greatest values are negative as signed), signed for i64.
  expect_stats_are_the_rows(tmp / "w/events.parquet", {"u64", "i64", "u32", "u16", "b", "none"}, tmp);
  json e = duckdb(tmp / "e", "SELECT count(*) AS n FROM events", tmp);
  EXPECT_EQ(e[0]["n"], 0);
}

// The Parquet export refuses bad input with a non-zero exit and the message of
// whichever side found it, and leaves neither a table nor its temporary
// directory (pipes) behind.
TEST(ExportTable, ParquetExportBadInputIsNamed) {
  REQUIRE_DUCKDB();
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  std::string nodetmp = tmp / "nodetmp";
  struct Case {
    std::string args, needle;
  } cases[] = {
      {(tmp / "no-such-trace") + " " + (tmp / "p1"), tmp / "no-such-trace"},
      {(tmp / "A") + " " + (tmp / "p2"), "not a translated trace"},  // cptrace's error, through the pipe's writer
      {out + " " + (tmp / "p3") + " --pair A.out,nope", "unknown channel \"nope\""},
      {out + " " + (tmp / "p4") + " --bogus", "unknown option --bogus"},
  };
  for (const Case& c : cases) {
    auto r = export_parquet(c.args, nodetmp, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
    EXPECT_EQ(listing(nodetmp), std::set<std::string>{}) << c.args;
  }
  for (const char* d : {"p1", "p2", "p3", "p4"})
    if (fs::exists(tmp / d)) {
      EXPECT_EQ(listing(tmp / d), std::set<std::string>{}) << d;
    }

  // An existing export needs -f, which replaces the tables of any form.
  auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "p5") + " --pair A.out,B.in", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  r = export_parquet(out + " " + (tmp / "p5"), nodetmp, tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
  r = export_parquet(out + " " + (tmp / "p5") + " -f", nodetmp, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "p5"), std::set<std::string>{"events.parquet"});
  EXPECT_EQ(listing(nodetmp), std::set<std::string>{});
}

// --parquet with one --pair on several threads hands the events table's
// decoded events to the latency join: when one side fails (here a meta.json
// that lost a node, which the join trips on), the other must not wait for it
// forever, the error is the one a single thread names, and no events file is
// left to look like a whole export.
TEST(ExportTable, ParquetPairErrorEndsBothTablesOnAnyThreads) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  const fs::path bad = tmp / "bad";
  fs::create_directories(bad);
  fs::copy_file(fs::path(out) / "events.cpt", bad / "events.cpt");
  json meta = json::parse(read_file(out + "/meta.json"));
  json& nodes = meta["translated"]["nodes"];
  ASSERT_EQ(nodes.size(), 3u);
  nodes.erase(nodes.size() - 1);
  std::ofstream(bad / "meta.json") << meta.dump();
  std::string first;
  for (const char* threads : {"1", "2", "3"}) {
    auto r = run("timeout 120 " + cptrace_bin() + " export table " + bad.string() + " --parquet --pair A.out,C.in -o " +
                     (tmp / ("o" + std::string(threads))) + " --threads " + threads,
                 tmp);
    EXPECT_NE(r.status, 0) << threads;
    EXPECT_NE(r.status, 124) << threads << ": did not end";
    // No events file: it would mark a whole export.
    EXPECT_EQ(listing(tmp / ("o" + std::string(threads))).count("events.parquet"), 0u) << threads << " threads";
    if (first.empty()) first = r.err;
    EXPECT_EQ(r.err, first) << threads << " threads";
  }
  EXPECT_NE(first, "");
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
      // Another format's option: refused by the command line parser (each format a subcommand).
      {" export csv " + out + " -o " + (tmp / "t4.csv") + " --pair A.out,B.in", "not expected: A.out,B.in --pair"},
      {" export csv " + out + " -o " + (tmp / "t4.csv") + " --plain", "not expected: --plain"},
      {" export csv " + out + " -o " + (tmp / "t4.csv") + " --stdout events", "not expected: events --stdout"},
      {" export ctf " + out + " -o " + (tmp / "t6") + " --parquet", "not expected: --parquet"},
      {" export table " + out + " --stdout nope", "--stdout 'nope': expected events or latency"},
      {" export table " + out + " --stdout latency", "--stdout latency needs at least one --pair"},
      {" export table " + out, "export table needs -o DIR or --stdout TABLE"},
  };
  for (const Case& c : cases) {
    auto r = run(cptrace_bin() + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp / "t3"));
  auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "t5"), std::set<std::string>{"events.csv.zst"});  // no --pair, no latency table
  r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("t5"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "t5") + " -f", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
}

// Decompressed, the tables are exactly what --plain writes (the text the export
// always wrote), and their rows are those `dump --csv` and `latency --csv` print
// of the same trace, field for field; compressed they are a fraction of it.
TEST(ExportTable, CompressedTablesAreThePlainTextOfDumpAndLatency) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  std::string pairs;
  for (auto& p : kPairs) pairs += std::string(" --pair ") + p[0] + "," + p[1];
  auto r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "zst") + pairs, tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("-> " + (tmp / "zst") + "/events.csv.zst"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " export table " + out + " -o " + (tmp / "plain") + pairs + " --plain", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "plain"), (std::set<std::string>{"events.csv", "latency.csv"}));
  for (const char* t : {"events", "latency"}) {
    std::string zst = tmp / "zst/" + t + ".csv.zst", plain = tmp / "plain/" + t + ".csv";
    std::string text = read_zst(zst);
    EXPECT_TRUE(text == read_file(plain)) << t << ": decompressed differs from --plain";
    EXPECT_LT(fs::file_size(zst) * 3, fs::file_size(plain)) << t;
    // --stdout (the Parquet export's source): the same text, and nothing else on stdout.
    auto s = run(cptrace_bin() + " export table " + out + " --stdout " + t + pairs, tmp);
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_TRUE(s.out == text) << t << ": --stdout differs from the exported table";
  }

  std::vector<std::string> ev = lines(read_zst(tmp / "zst/events.csv.zst"));
  ASSERT_EQ(ev.size(), 1u + 4 * 1500);
  EXPECT_EQ(ev[0],
            "node,reference,kind,channel,channel_id,tuple,pid,tid,cpu,local_ts,ref_ts,ref_lo,ref_hi,time_ns,"
            "time_lo_ns,time_hi_ns");
  auto d = run(cptrace_bin() + " dump " + out + " --csv", tmp);
  ASSERT_EQ(d.status, 0) << d.err;
  std::vector<std::string> dump = lines(d.out);
  ASSERT_EQ(dump.size(), ev.size()) << dump[0];
  // dump: node,kind,local_ts,ref_est,ref_lo,ref_hi,channel,tuple,pid,tid,cpu
  for (size_t i = 1; i < ev.size(); ++i)
    ASSERT_EQ(project(ev[i], {0, 2, 9, 10, 11, 12, 3, 5, 6, 7, 8}), dump[i]) << "event row " << i;

  std::vector<std::string> lat = lines(read_zst(tmp / "zst/latency.csv.zst"));
  EXPECT_EQ(lat[0],
            "from_channel,to_channel,tuple,from_node,to_node,scenario,remote,from_ref_ts,ticks,ticks_lo,"
            "ticks_hi,ns,ns_lo,ns_hi");
  size_t row = 1;
  for (auto& p : kPairs) {
    auto l = run(cptrace_bin() + " latency " + out + " --from " + p[0] + " --to " + p[1] + " --csv", tmp);
    ASSERT_EQ(l.status, 0) << l.err;
    std::vector<std::string> want = lines(l.out);  // tuple,from_node,to_node,scenario,ticks..ns_hi
    ASSERT_EQ(want.size(), 1u + 1500) << p[0] << " -> " << p[1];
    for (size_t i = 1; i < want.size(); ++i, ++row) {
      ASSERT_LT(row, lat.size());
      ASSERT_EQ(project(lat[row], {0, 1}), std::string(p[0]) + "," + p[1]) << "latency row " << row;
      ASSERT_EQ(project(lat[row], {2, 3, 4, 5, 8, 9, 10, 11, 12, 13}), want[i]) << "latency row " << row;
    }
  }
  EXPECT_EQ(row, lat.size());
}

// -f replaces an export of either form: no plain table is left beside the
// compressed ones (a reader would take either), nor the reverse.
TEST(ExportTable, ForceReplacesTheOtherForm) {
  TempDir tmp;
  std::string out = translated_cluster(tmp, true);
  std::string cmd = cptrace_bin() + " export table " + out + " -o " + (tmp / "t") + " --pair A.out,B.in";
  auto r = run(cmd + " --plain", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(cmd, tmp);
  EXPECT_NE(r.status, 0) << "wrote into an existing export without -f";
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.csv", "latency.csv"}));
  r = run(cmd + " -f", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.csv.zst", "latency.csv.zst"}));
  r = run(cmd + " --plain -f", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.csv", "latency.csv"}));
  r = run(cmd + " --parquet", tmp);
  EXPECT_NE(r.status, 0) << "wrote Parquet into an existing export without -f";
  r = run(cmd + " --parquet -f", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.parquet", "latency.parquet"}));
  r = run(cmd + " -f", tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.csv.zst", "latency.csv.zst"}));
  // Parquet is a file form: not with --plain, nor as a stream on stdout.
  for (std::string bad : {" -o " + (tmp / "t") + " --parquet --plain -f", std::string(" --parquet --stdout events")}) {
    r = run(cptrace_bin() + " export table " + out + bad, tmp);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.err.find("--parquet"), std::string::npos) << bad << ": " << r.err;
  }
  EXPECT_EQ(listing(tmp / "t"), (std::set<std::string>{"events.csv.zst", "latency.csv.zst"}));
}

TEST(ExportTable, QueryScriptRefusesANonExport) {
  REQUIRE_DUCKDB();
  TempDir tmp;
  auto r = run("node " + duckdb_dir() + "/query.mjs " + tmp.path.string() + " 'SELECT 1'", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no events or packets table (.parquet, .csv.zst, .csv)"), std::string::npos) << r.err;
}
