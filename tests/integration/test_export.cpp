// `cptrace export`: CTF read back by the real babeltrace2, trace-event JSON and CSV,
// each compared event by event with `cptrace dump --csv`; bounded memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "export/export_ctf.h"
#include "synthetic_trace.h"
#include "trace/trace_reader.h"
#include "record_util.h"
#include "test_util.h"

using namespace cptrace;
using namespace testutil;
using nlohmann::json;

namespace {

constexpr uint64_t O = SyntheticTrace::kOrigin;

// kind, ts, channel, tuple, pid, tid, cpu
using Ev = std::tuple<std::string, uint64_t, std::string, uint64_t, uint32_t, uint32_t, uint32_t>;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// The fields of one RFC 4180 row ("a,""b""" -> a, "b"), as dump --csv quotes names.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
      out.back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// `cptrace dump --csv`: node,kind,ts,channel,tuple,pid,tid,cpu (sorted).
std::vector<Ev> dump_events(const std::string& dir, const TempDir& tmp) {
  auto r = run(cptrace_bin() + " dump --csv " + dir, tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<Ev> evs;
  auto lines = split(r.out, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = csv_fields(lines[i]);
    EXPECT_EQ(f.size(), 8u) << lines[i];
    if (f.size() != 8) continue;
    evs.emplace_back(f[1], std::stoull(f[2]), f[3], std::stoull(f[4]), std::stoul(f[5]), std::stoul(f[6]),
                     std::stoul(f[7]));
  }
  std::sort(evs.begin(), evs.end());
  return evs;
}

bool have(const char* prog) { return system((std::string("command -v ") + prog + " >/dev/null 2>&1").c_str()) == 0; }

#define REQUIRE_BABELTRACE2()                                                                      \
  do {                                                                                             \
    if (!have("babeltrace2"))                                                                      \
      GTEST_SKIP() << "SKIPPED: babeltrace2 is not installed (tools/install-deps.sh installs it)"; \
  } while (0)

// babeltrace2 text: every event with its raw TSC timestamp (the tsc field);
// times_ns, if given: tsc -> the event's time, ns since the epoch, as babeltrace2
// computes it from the clock class.
std::vector<Ev> babeltrace_events(const std::string& ctf, const TempDir& tmp, std::string* err = nullptr,
                                  std::map<uint64_t, uint64_t>* times_ns = nullptr) {
  auto r = run("babeltrace2 --clock-seconds --no-delta " + ctf, tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  if (err) *err = r.err;
  static const std::regex line(
      R"RE(^\[(\d+)\.(\d{9})\] \S+ cptrace:(user|close): \{ cpu_id = (\d+) \}, \{ channel = "(.*)", channel_id = 0x[0-9A-Fa-f]+, )RE"
      R"RE(tuple = (\d+), pid = (\d+), tid = (\d+), cpu = (\d+), tsc = (\d+) \}$)RE");
  std::vector<Ev> evs;
  size_t unparsed = 0;
  uint64_t prev_ns = 0;
  for (const auto& l : split(r.out, '\n')) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) {
      unparsed += !l.empty();
      continue;
    }
    EXPECT_EQ(m[4], m[9]) << "packet cpu_id differs from the event's cpu: " << l;
    std::string ch = std::regex_replace(m[5].str(), std::regex(R"(\\(.))"), "$1");  // babeltrace2 escapes quotes
    uint64_t ns = std::stoull(m[1]) * 1000000000ull + std::stoull(m[2]), tsc = std::stoull(m[10]);
    EXPECT_TRUE(prev_ns <= ns) << "babeltrace2 merges the streams in time order: " << l;
    prev_ns = ns;
    if (times_ns) (*times_ns)[tsc] = ns;
    evs.emplace_back(m[3], tsc, ch, std::stoull(m[6]), std::stoul(m[7]), std::stoul(m[8]), std::stoul(m[9]));
  }
  EXPECT_EQ(unparsed, 0u) << r.out.substr(0, 2000);
  std::sort(evs.begin(), evs.end());
  return evs;
}

// Events in a scrambled file order across three CPUs and three threads, with a
// close event and an event stamped before the trace start.
SyntheticTrace scrambled_trace(size_t n) {
  SyntheticTrace t;
  t.channels = {{0x1111, "ingest"}, {0x2222, "emit \"quoted\""}, {0x3333, "sink"}};
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < n; ++i) {
    uint16_t cpu = uint16_t(rng() % 3);
    uint64_t ch = (i % 3 == 0) ? 0x1111 : (i % 3 == 1) ? 0x2222 : 0x3333;
    t.add(ch, O + 1000 * i + rng() % 5000, i, cpu, 4000 + cpu, 5000 + uint32_t(i % 3));
  }
  t.add(0x1111, O - 777, 999999, 1);
  t.add(0x3333, O + 1000 * n + 10, 0, 2, 4002, 5002, uint8_t(EventKind::ChannelClose));
  // Whole blocks out of order too, as a slow ring drain leaves them.
  std::swap_ranges(t.events.begin(), t.events.begin() + n / 4, t.events.begin() + n / 2);
  t.per_frame = 97;
  return t;
}

}  // namespace

TEST(ExportCtf, BabeltraceReadsEveryEventOfScrambledTrace) {
  REQUIRE_BABELTRACE2();
  TempDir tmp;
  scrambled_trace(5000).write(tmp / "t");
  auto expect = dump_events(tmp / "t", tmp);
  ASSERT_EQ(expect.size(), 5002u);

  // A tiny reorder window forces late streams: still every event, in order per stream.
  {
    TraceReader r(tmp / "t");
    CtfStats s = export_ctf(r, trace_timeline(r), tmp / "small", false, 8);
    EXPECT_EQ(s.events, 5002u);
    EXPECT_GT(s.late_streams, 0u) << "the window did not force a late stream: the test proves nothing";
    std::string err;
    EXPECT_EQ(babeltrace_events(tmp / "small", tmp, &err), expect);
  }
  // The command line, default window.
  auto r = run(cptrace_bin() + " export ctf " + (tmp / "t") + " -o " + (tmp / "ctf"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(babeltrace_events(tmp / "ctf", tmp), expect);

  // The clock: TSC at exactly 1 GHz, offset so that the origin is the recorder's
  // wall-clock start (1700000000 s = 2023-11-14 22:13:20 UTC). Event at O - 777.
  auto w = run("babeltrace2 --clock-gmt --clock-date --no-delta " + (tmp / "ctf") + " | head -1", tmp);
  EXPECT_NE(w.out.find("[2023-11-14 22:13:19.999999223]"), std::string::npos) << w.out;
  std::string meta = read_file(tmp / "ctf/metadata");
  EXPECT_EQ(meta.rfind("/* CTF 1.8 */", 0), 0u);
  EXPECT_NE(meta.find("freq = 1000000000;"), std::string::npos) << meta;

  // Refuses to overwrite without -f, then overwrites with it.
  r = run(cptrace_bin() + " export ctf " + (tmp / "t") + " -o " + (tmp / "ctf"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("already holds a CTF trace"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " export ctf " + (tmp / "t") + " -o " + (tmp / "ctf") + " -f", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(ExportCtf, RecordedWorkloadMatchesDump) {
  REQUIRE_BPF();
  REQUIRE_BABELTRACE2();
  TempDir tmp;
  // Batch mode: rdtsc stamps handed over 256 at a time, so file order is not time order.
  auto r = run(record_cmd(tmp / "t", "--ring-mb 16") + " -- " + workload() +
                   " --threads 3 --events 30000 --channels 3 --mode batch",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto expect = dump_events(tmp / "t", tmp);
  ASSERT_EQ(expect.size(), 90003u);  // 3 x 30000 user events + 3 channel closes
  r = run(cptrace_bin() + " export ctf " + (tmp / "t") + " -o " + (tmp / "ctf"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<uint64_t, uint64_t> times;
  EXPECT_EQ(babeltrace_events(tmp / "ctf", tmp, nullptr, &times), expect);

  // Each event's time is its TSC converted as every reader converts it (the
  // correlation stream), plus the wall-clock offset of the recording start, to
  // the nanosecond: no rounding of the measured TSC frequency on the way.
  TraceReader tr(tmp / "t");
  const auto& start = tr.meta()["start"];
  int64_t rt_minus_mono = int64_t(start["realtime_ns"].get<uint64_t>() - start["mono_ns"].get<uint64_t>());
  ASSERT_NE(std::fmod(tr.meta()["tsc_hz"].get<double>(), 1.0), 0.0) << "an integer TSC frequency proves nothing";
  size_t off = 0;
  for (auto [tsc, ns] : times) {
    int64_t want = int64_t(tr.clock_map().tsc_to_mono(tsc)) + rt_minus_mono;
    if (int64_t(ns) != want && off++ < 5)
      ADD_FAILURE() << "tsc " << tsc << ": babeltrace2 " << ns << " ns, expected " << want;
  }
  EXPECT_EQ(off, 0u) << "of " << times.size() << " events";
}

TEST(ExportJson, TraceEventsMatchDump) {
  TempDir tmp;
  scrambled_trace(3000).write(tmp / "t");
  auto expect = dump_events(tmp / "t", tmp);
  auto r = run(cptrace_bin() + " export json " + (tmp / "t") + " -o " + (tmp / "t.json"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(read_file(tmp / "t.json"));
  EXPECT_EQ(j["otherData"]["tsc_hz"], 1e9);
  std::vector<Ev> got;
  for (const auto& e : j["traceEvents"]) {
    EXPECT_EQ(e["ph"], "i");
    std::string name = e["name"];
    std::string kind = e["cat"];
    if (kind == "close") name = name.substr(6);  // "close:"
    uint64_t tsc = std::stoull(e["args"]["tsc"].get<std::string>());
    // ts: microseconds since the origin at 1 GHz, to the nanosecond.
    EXPECT_NEAR(e["ts"].get<double>(), (double(int64_t(tsc - O))) / 1e3, 1e-6) << e.dump();
    got.emplace_back(kind, tsc, name, std::stoull(e["args"]["tuple"].get<std::string>()), e["pid"], e["tid"],
                     e["args"]["cpu"]);
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expect);
}

TEST(ExportCsv, RowsMatchDump) {
  TempDir tmp;
  scrambled_trace(3000).write(tmp / "t");
  auto expect = dump_events(tmp / "t", tmp);
  auto r = run(cptrace_bin() + " export csv " + (tmp / "t") + " -o " + (tmp / "t.csv"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines = split(read_file(tmp / "t.csv"), '\n');
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "node,kind,ts,time_ns,channel,channel_id,tuple,pid,tid,cpu");
  std::vector<Ev> got;
  static const std::regex row(
      R"(^synth,(\w+),(\d+),(-?\d+),("(?:[^"]|"")*"|[^,]*),0x[0-9a-f]{16},(\d+),(\d+),(\d+),(\d+)$)");
  for (size_t i = 1; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, row)) << lines[i];
    uint64_t ts = std::stoull(m[2]);
    EXPECT_EQ(std::stoll(m[3]), int64_t(ts - O));
    std::string ch = m[4];
    if (!ch.empty() && ch[0] == '"') ch = std::regex_replace(ch.substr(1, ch.size() - 2), std::regex("\"\""), "\"");
    got.emplace_back(m[1], ts, ch, std::stoull(m[5]), std::stoul(m[6]), std::stoul(m[7]), std::stoul(m[8]));
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expect);
  EXPECT_EQ(got.size(), 3002u);
}

TEST(Export, BadInput) {
  TempDir tmp;
  scrambled_trace(100).write(tmp / "t");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"export xml " + (tmp / "t") + " -o " + (tmp / "x"), "unknown format 'xml' (ctf, json, csv or table)"},
      {"export csv " + (tmp / "none") + " -o " + (tmp / "x"), "no such file or directory"},
      {"export json " + tmp.path.string() + " -o " + (tmp / "x"), "not a cptrace trace directory"},
      {"export csv " + (tmp / "t") + " -o " + (tmp / "t/meta.json"), "exists (use -f to overwrite)"},
      {"export csv " + (tmp / "t") + " -o /proc/nope/x.csv", "/proc/nope/x.csv: cannot create"},
      {"export ctf " + (tmp / "t") + " -o " + (tmp / "t/meta.json"), "is not a directory"},
  };
  for (const auto& c : cases) {
    auto r = run(cptrace_bin() + " " + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
  // Truncated trace: what is before the bad frame is exported, exit status 2.
  std::string ev = tmp / "t/events.cpt";
  std::filesystem::resize_file(ev, std::filesystem::file_size(ev) - 30);
  auto r = run(cptrace_bin() + " export csv " + (tmp / "t") + " -o " + (tmp / "cut.csv"), tmp);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("at byte"), std::string::npos) << r.err;
  EXPECT_EQ(split(read_file(tmp / "cut.csv"), '\n').size(), 103u);  // header + 102 events before the cut
}

namespace {

// Peak resident set (KiB) of a command, as GNU time reports it. (wait4()'s
// ru_maxrss would also count the pages this big test process had when it forked.)
long peak_rss_kib(const std::string& cmd, const TempDir& tmp, int* status) {
  auto r = run("/usr/bin/time -f 'maxrss_kib=%M' " + cmd, tmp);
  *status = r.status;
  auto at = r.err.rfind("maxrss_kib=");
  EXPECT_NE(at, std::string::npos) << r.err;
  return at == std::string::npos ? -1 : std::stol(r.err.substr(at + 11));
}

}  // namespace

// Streaming: the exporters hold a frame (and CTF a bounded reorder window), not
// the trace. 4 M events are 160 MB as decoded events; every exporter must stay
// far below that.
TEST(Export, MemoryStaysBoundedOnLargeTrace) {
  if (!std::filesystem::exists("/usr/bin/time"))
    GTEST_SKIP() << "SKIPPED: /usr/bin/time (Debian package time) is not installed; tools/install-deps.sh installs it";
  TempDir tmp;
  SyntheticTrace t;
  t.channels = {{1, "a"}, {2, "b"}};
  const size_t n = 4'000'000;
  t.events.reserve(n);
  for (size_t i = 0; i < n; ++i) t.add(1 + i % 2, O + 100 * i + (i * 7919) % 3000, i, uint16_t(i % 4));
  t.per_frame = 16384;
  t.write(tmp / "t");
  t.events.clear();
  t.events.shrink_to_fit();
  const long raw_kib = long(n * sizeof(TraceEvent) / 1024);
  for (std::string fmt : {"csv", "json", "ctf"}) {
    int status = -1;
    long kib = peak_rss_kib(cptrace_bin() + " export " + fmt + " " + (tmp / "t") + " -o " + (tmp / ("out." + fmt)), tmp,
                            &status);
    EXPECT_EQ(status, 0) << fmt;
    printf("[ figure ] export %s of %zu events: peak RSS %ld KiB (decoded events: %ld KiB)\n", fmt.c_str(), n, kib,
           raw_kib);
    EXPECT_GT(kib, 0);
    EXPECT_LT(kib, raw_kib / 4) << fmt << " holds too much of the trace in memory";
    std::filesystem::remove_all(tmp / ("out." + fmt));
  }
}

// A `counter` handler's series points are their own kind in every export, with
// the period from the handler history, not user events whose tuple is a count.
TEST(Export, CounterPeriodsAreTheirOwnEventKind) {
  REQUIRE_BPF();
  REQUIRE_BABELTRACE2();
  TempDir tmp;
  {
    std::ofstream cfg(tmp / "cfg");
    cfg << "chan1 counter 5ms\n";
  }
  auto r = run(record_cmd(tmp / "t", "--config " + (tmp / "cfg")) + " -- " + workload() +
                   " --threads 1 --channels 2 --all-channels --events 5000 --pace-us 20 --mode single",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  // dump: (tsc, channel, count, cpu) of every series point, and chan0's events.
  using Point = std::tuple<uint64_t, std::string, uint64_t, uint32_t>;
  std::vector<Point> want;
  uint64_t user_events = 0, counted = 0;
  for (const Ev& e : dump_events(tmp / "t", tmp)) {
    if (std::get<0>(e) == "count") {
      want.emplace_back(std::get<1>(e), std::get<2>(e), std::get<3>(e), std::get<6>(e));
      counted += std::get<3>(e);
    }
    if (std::get<0>(e) == "user") user_events++;
  }
  std::sort(want.begin(), want.end());
  ASSERT_GT(want.size(), 1u) << "no counter periods: the test proves nothing";
  EXPECT_EQ(counted, 5000u) << "the series adds up to chan1's events";

  r = run(cptrace_bin() + " export json " + (tmp / "t") + " -o " + (tmp / "t.json"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(read_file(tmp / "t.json"));
  std::vector<Point> got;
  uint64_t json_user = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["cat"] == "user") {
      json_user++;
      EXPECT_EQ(e["name"], "chan0") << e.dump();
    }
    if (e["cat"] != "counter_period") continue;
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["args"]["period_ns"], "5000000");
    EXPECT_EQ(e["dur"].get<double>(), 5000.0);
    got.emplace_back(std::stoull(e["args"]["tsc"].get<std::string>()), e["name"],
                     std::stoull(e["args"]["count"].get<std::string>()), e["args"]["cpu"]);
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(json_user, user_events);

  r = run(cptrace_bin() + " export ctf " + (tmp / "t") + " -o " + (tmp / "ctf"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto bt = run("babeltrace2 --clock-seconds --no-delta " + (tmp / "ctf"), tmp);
  ASSERT_EQ(bt.status, 0) << bt.err;
  static const std::regex period(
      R"RE(^\[\d+\.\d{9}\] \S+ cptrace:counter_period: \{ cpu_id = (\d+) \}, \{ channel = "(.*)", channel_id = 0x[0-9A-Fa-f]+, )RE"
      R"RE(count = (\d+), period_ns = (\d+), cpu = (\d+), tsc = (\d+) \}$)RE");
  got.clear();
  uint64_t ctf_user = 0;
  for (const auto& l : split(bt.out, '\n')) {
    std::smatch m;
    if (l.find("cptrace:user:") != std::string::npos) {
      ctf_user++;
      EXPECT_NE(l.find("channel = \"chan0\""), std::string::npos) << l;
    }
    if (l.find("cptrace:counter_period:") == std::string::npos) continue;
    ASSERT_TRUE(std::regex_match(l, m, period)) << l;
    EXPECT_EQ(m[4], "5000000");
    EXPECT_EQ(m[1], m[5]);
    got.emplace_back(std::stoull(m[6]), m[2], std::stoull(m[3]), std::stoul(m[5]));
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(ctf_user, user_events);
}
