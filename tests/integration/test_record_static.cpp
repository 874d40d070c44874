// A program with libcptrace.a linked into a non-PIE executable
// (tests/workloads/static/non_pie.c): its probe sites are in the executable at
// 0x400000, which /proc/PID/maps prints zero-padded and /proc/PID/map_files/
// names without the zeros. Found and recorded exactly by `-p PID` and, through
// its hello, by `--all`.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <string>

#include "cptrace.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t kEvents = 1000;

std::string non_pie() { return (build_dir() / "tests" / "non_pie").string() + " " + std::to_string(kEvents); }

// Events of "static.log" per pid, each tuple once.
std::map<uint32_t, uint64_t> static_events(const std::string& dir) {
  TraceReader tr(dir);
  EXPECT_FALSE(tr.error()) << tr.error()->what();
  std::map<uint32_t, uint64_t> n;
  std::map<uint32_t, std::set<uint64_t>> seen;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User) || e.channel != cp_channel_id("static.log")) return;
    n[e.pid]++;
    EXPECT_TRUE(seen[e.pid].insert(e.tuple).second) << "tuple " << e.tuple << " twice";
    EXPECT_LT(e.tuple, kEvents);
  });
  return n;
}

}  // namespace

TEST(RecordStatic, NonPieProgramByPid) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc prog(non_pie(), tmp / "p.out", tmp / "p.err");
  ASSERT_TRUE(prog.wait_for("READY", 30)) << read_file(tmp / "p.err");
  pid_t pid = prog.pid;
  Proc rec(record_cmd(tmp / "t", "-p " + std::to_string(pid)), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec, 60));
  kill(pid, SIGUSR1);
  ASSERT_EQ(prog.wait(60), 0);
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");  // ends with the process
  auto n = static_events(tmp / "t");
  EXPECT_EQ(n[uint32_t(pid)], kEvents) << read_file(tmp / "rec.err");
}

TEST(RecordStatic, NonPieProgramSaysHelloUnderRecordAll) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc rec(record_cmd(tmp / "t", "--all"), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec, 60));
  Proc prog(non_pie(), tmp / "p.out", tmp / "p.err");
  ASSERT_TRUE(prog.wait_for("READY", 30)) << read_file(tmp / "p.err");
  pid_t pid = prog.pid;
  kill(pid, SIGUSR1);
  ASSERT_EQ(prog.wait(60), 0);
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");
  auto n = static_events(tmp / "t");
  EXPECT_EQ(n[uint32_t(pid)], kEvents) << read_file(tmp / "rec.err");
}
