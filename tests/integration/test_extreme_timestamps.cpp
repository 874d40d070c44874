// Timestamps at the ends of the 64-bit range (a process handing the batch site
// 0 or UINT64_MAX): every analysis and export must stay within memory bounded by
// the number of events, never by the time span, and end with a result or a clear
// error, never bad_alloc or a signal. Each command runs with its address space
// limited to 1 GiB, so an allocation by time span fails fast instead of
// swapping the machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "synthetic_trace.h"
#include "test_util.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t O = SyntheticTrace::kOrigin;
constexpr uint64_t kIn = 1, kOut = 2;

// A one-second trace with a few ordinary events, plus the extreme stamps: 0,
// UINT64_MAX and its neighbour, and the two sides of origin + 2^63, where a
// signed difference from the origin wraps.
void write_extreme_trace(const std::string& dir) {
  SyntheticTrace t;
  t.channels = {{kIn, "in"}, {kOut, "out"}};
  for (uint64_t i = 0; i < 10; ++i) {
    t.add(kIn, O + 1000 + i * 50'000'000, i);
    t.add(kOut, O + 2000 + i * 50'000'000, i);
  }
  const uint64_t half = uint64_t(1) << 63;
  uint64_t tuple = 100;
  for (uint64_t ts : {uint64_t(0), UINT64_MAX, UINT64_MAX - 1, O + half - 1, O + half}) {
    t.add(kIn, ts, tuple);
    t.add(kOut, ts, tuple++);
  }
  t.stop = O + 1'000'000'000;  // add() moved it to the largest stamp
  t.write(dir);
}

struct Outcome {
  int status;
  std::string err;
};

// Runs `cptrace ARGS` under a 1 GiB address-space limit; a sanitized cptrace
// (whose shadow memory alone reserves terabytes) without it, for the UB checks.
Outcome run_limited(const TempDir& tmp, const std::string& args) {
  std::string limit = testutil::sanitized_cptrace() ? "" : "prlimit --as=1073741824 ";
  auto r = run(limit + cptrace_bin() + " " + args + " >/dev/null", tmp);
  return {r.status, r.err};
}

// Exit 0, or 1 with a message (a refusal), never a crash.
void expect_clean(const Outcome& o, const std::string& what) {
  EXPECT_TRUE(o.status == 0 || o.status == 1) << what << ": status " << o.status << "\n" << o.err;
  EXPECT_EQ(o.err.find("bad_alloc"), std::string::npos) << what << ": " << o.err;
  EXPECT_EQ(o.err.find("terminate called"), std::string::npos) << what << ": " << o.err;
  if (o.status != 0) {
    EXPECT_NE(o.err.find("cptrace"), std::string::npos) << what << ": a refusal must say why: " << o.err;
  }
}

}  // namespace

TEST(ExtremeTimestamps, EveryAnalysisBoundedByEventsNotSpan) {
  TempDir tmp;
  std::string dir = tmp / "trace";
  write_extreme_trace(dir);
  struct Case {
    std::string args;
    bool must_succeed;  // false: may refuse with a clear error
  };
  const Case cases[] = {
      {"info " + dir, true},
      {"dump " + dir, true},
      {"dump --csv " + dir, true},
      {"throughput " + dir, false},
      {"throughput --period 0.001 " + dir, false},
      {"throughput --period 0.001 --json " + dir, false},
      {"throughput --period 0.001 --csv " + dir, false},
      {"rates --channel-pair in,out " + dir, false},
      {"rates --channel-pair in,out --period 0.001 " + dir, false},
      {"report -o " + (tmp / "r.html") + " " + dir, true},
      {"report --period 0.001 -o " + (tmp / "r2.html") + " " + dir, false},
      {"export json -o " + (tmp / "e.json") + " " + dir, true},
      {"export csv -o " + (tmp / "e.csv") + " " + dir, true},
      {"export ctf -o " + (tmp / "ctf") + " " + dir, true},
  };
  for (const Case& c : cases) {
    Outcome o = run_limited(tmp, c.args);
    expect_clean(o, c.args);
    if (c.must_succeed) {
      EXPECT_EQ(o.status, 0) << c.args << "\n" << o.err;
    }
  }
  // translate refuses a stamp its clock relations cannot carry, naming it; were
  // it to accept one, the translated trace must analyse like any other.
  Outcome o = run_limited(tmp, "translate --reference synth -o " + (tmp / "tr") + " " + dir);
  expect_clean(o, "translate");
  if (o.status != 0) {
    EXPECT_NE(o.err.find("18446744073709551615"), std::string::npos) << o.err;
    return;
  }
  for (std::string args :
       {"latency --from in --to out " + (tmp / "tr"), "report -o " + (tmp / "r3.html") + " " + (tmp / "tr")})
    expect_clean(run_limited(tmp, args), args);
}

// The refusals name the flag and how far the events reach.
TEST(ExtremeTimestamps, RefusalsSayWhy) {
  TempDir tmp;
  std::string dir = tmp / "trace";
  write_extreme_trace(dir);
  Outcome t = run_limited(tmp, "throughput --period 0.001 " + dir);
  EXPECT_EQ(t.status, 1) << t.err;
  EXPECT_NE(t.err.find("--period 0.001: the events span"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("outside the recording"), std::string::npos) << t.err;
  Outcome q = run_limited(tmp, "rates --channel-pair in,out --period 0.001 " + dir);
  EXPECT_EQ(q.status, 1) << q.err;
  EXPECT_NE(q.err.find("--period 0.001: events up to"), std::string::npos) << q.err;
  // The automatic report period grows to cover the stray events instead.
  Outcome r = run_limited(tmp, "report -o " + (tmp / "r.html") + " " + dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("instead"), std::string::npos) << r.err;
}
