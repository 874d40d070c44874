// Stamps that know their CPU (issue: CPU-aware stamps): cp_logTS's buffered
// path reads the TSC with rdtscp, hands over one CPU's stamps at a time, and the
// trace names that CPU. A same-node duration between two stamps of one CPU then
// carries no cross-CPU skew term; between two CPUs it carries it. Both must
// still contain the truth the program bracketed around its calls.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "cptrace.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace testutil;

namespace cptrace {
namespace {

struct Truth {
  bool moved = false;
  uint64_t in0 = 0, in1 = 0, out0 = 0, out1 = 0;
};

std::map<uint64_t, Truth> read_truth(const std::string& path) {
  std::map<uint64_t, Truth> t;
  std::ifstream in(path);
  uint64_t tuple;
  int moved;
  Truth x;
  while (in >> tuple >> moved >> x.in0 >> x.in1 >> x.out0 >> x.out1) {
    x.moved = moved;
    t[tuple] = x;
  }
  return t;
}

struct Row {
  int64_t ticks = 0, lo = 0, hi = 0;
};

// `latency --csv` rows by tuple: what a user reads.
std::map<uint64_t, Row> latency_rows(const std::string& dir, const TempDir& tmp) {
  auto r = run(cptrace_bin() + " latency " + dir + " --from pair.in --to pair.out --csv", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  std::map<uint64_t, Row> rows;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() < 7) continue;
    rows[std::stoull(f[0])] = {std::stoll(f[4]), std::stoll(f[5]), std::stoll(f[6])};
  }
  return rows;
}

// Runs stamp_pair under `record` and checks every pair against its brackets;
// returns the rows and the truth for the caller's checks.
void record_pairs(const TempDir& tmp, const std::string& args, std::map<uint64_t, Row>& rows,
                  std::map<uint64_t, Truth>& truth) {
  auto r = run(record_cmd(tmp / "t",
                          "-- " + (build_dir() / "tests" / "stamp_pair").string() + " " + (tmp / "truth") + " " + args),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  truth = read_truth(tmp / "truth");
  rows = latency_rows(tmp / "t", tmp);
  ASSERT_EQ(rows.size(), truth.size());
  size_t contained = 0;
  for (const auto& [tuple, row] : rows) {
    const Truth& t = truth.at(tuple);
    // The truth lies in [out0 - in1, out1 - in0]: the bound must meet it.
    int64_t lo = int64_t(t.out0 - t.in1), hi = int64_t(t.out1 - t.in0);
    bool ok = row.lo <= hi && row.hi >= lo && row.lo <= row.ticks && row.ticks <= row.hi;
    contained += ok;
    EXPECT_TRUE(ok) << "tuple " << tuple << ": bound [" << row.lo << ", " << row.hi << "], truth within [" << lo << ", "
                    << hi << "]";
  }
  printf("  [stamp cpu] %s: %zu of %zu bounds meet their truth\n", args.c_str(), contained, rows.size());
}

// A thread that stays on one CPU: every stamp names it, and every duration is
// exact in ticks (no skew term), inside its truth.
TEST(StampCpu, OneCpuPairsAreExact) {
  REQUIRE_BPF();
  TempDir tmp;
  std::map<uint64_t, Row> rows;
  std::map<uint64_t, Truth> truth;
  record_pairs(tmp, "--events 2000", rows, truth);
  ASSERT_EQ(rows.size(), 2000u);
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error());
  uint64_t on_cpu0 = 0, user = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    user++;
    on_cpu0 += e.timebase == uint8_t(Timebase::TscOnCpu) && e.cpu == 0;
  });
  EXPECT_EQ(user, 4000u);
  size_t exact = 0;
  for (const auto& [tuple, row] : rows) exact += row.lo == row.hi;
  if (cpu_offers_rdtscp()) {
    EXPECT_EQ(on_cpu0, 4000u) << "every stamp read on CPU 0, and named so";
    EXPECT_EQ(exact, 2000u) << "two stamps of one CPU: no skew term";
  } else {
    EXPECT_EQ(on_cpu0, 0u) << "no rdtscp: no stamp names a CPU";
  }
}

// Every third pair's thread moves to the other CPU between its two calls:
// those pairs carry the skew between the CPUs, the others none; each stamp
// names the CPU it was read on; all meet their truth.
TEST(StampCpu, PairsAcrossCpusCarryTheSkew) {
  REQUIRE_BPF();
  TempDir tmp;
  std::map<uint64_t, Row> rows;
  std::map<uint64_t, Truth> truth;
  record_pairs(tmp, "--events 900 --move-every 3", rows, truth);
  ASSERT_EQ(rows.size(), 900u);
  size_t moved = 0, moved_wide = 0, kept_exact = 0;
  for (const auto& [tuple, row] : rows) {
    bool m = truth.at(tuple).moved;
    moved += m;
    moved_wide += m && row.hi > row.lo;
    kept_exact += !m && row.lo == row.hi;
  }
  EXPECT_EQ(moved, 300u);
  EXPECT_EQ(moved_wide, 300u) << "stamps of two CPUs carry the skew between them";
  if (cpu_offers_rdtscp()) {
    EXPECT_EQ(kept_exact, 600u);
  }
  // The CPU of each stamp, from the moves the program made: tuple i's in-event
  // follows the moves of the tuples before it, its out-event its own too.
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error());
  uint64_t in = cp_channel_id("pair.in"), wrong = 0, named = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User) || e.timebase != uint8_t(Timebase::TscOnCpu)) return;
    named++;
    uint64_t moves = e.channel == in ? (e.tuple + 2) / 3 : e.tuple / 3 + 1;
    wrong += e.cpu != moves % 2;
  });
  EXPECT_EQ(named, cpu_offers_rdtscp() ? 1800u : 0u);
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace cptrace
