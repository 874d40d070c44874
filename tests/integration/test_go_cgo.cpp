// A Go program calling cp_logTS through cgo from 64 goroutines
// (tests/workloads/go/cgo_logger.go): Go moves goroutines between its threads,
// starts threads as cgo calls block and preempts them with SIGURG, the signal
// the recorder's hello borrows. Every event is recorded exactly once, under
// `-- CMD` on each single path and under `record --all` with three programs
// at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cptrace.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t kGoroutines = 64, kEvents = 2500;

std::string go_logger() {
  std::string p = (build_dir() / "tests" / "cgo_logger").string();
  // Built by `make test` (Debian's golang-go, installed by make deps): missing is a
  // broken set-up, not a reason to skip.
  EXPECT_TRUE(std::filesystem::exists(p)) << p << ": run `make test` (it builds the Go workload)";
  return p + " --goroutines " + std::to_string(kGoroutines) + " --events " + std::to_string(kEvents);
}

struct PerPid {
  uint64_t events = 0, duplicates = 0, foreign = 0;  // foreign: a tuple no goroutine logged
  std::set<uint64_t> tuples;
};

std::map<uint32_t, PerPid> go_events(const std::string& dir) {
  TraceReader tr(dir);
  EXPECT_FALSE(tr.error()) << tr.error()->what();
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  std::map<uint32_t, PerPid> out;
  const uint64_t ch = cp_channel_id("go.log");
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User) || e.channel != ch) return;
    PerPid& p = out[e.pid];
    p.events++;
    uint64_t g = e.tuple / 1000000000, k = e.tuple % 1000000000;
    if (g >= kGoroutines || k >= kEvents) p.foreign++;
    if (!p.tuples.insert(e.tuple).second) p.duplicates++;
  });
  return out;
}

void expect_exact(const PerPid& p, const std::string& what) {
  EXPECT_EQ(p.events, kGoroutines * kEvents) << what;
  EXPECT_EQ(p.duplicates, 0u) << what;
  EXPECT_EQ(p.foreign, 0u) << what;
}

uint64_t total_of(const std::string& out) {
  auto j = nlohmann::json::parse(out.substr(0, out.find('\n')), nullptr, false);
  return j.is_object() ? j.value("total", uint64_t(0)) : 0;
}

// `record -- CMD`, cp_logTS's path chosen by CPTRACE_SINGLE (site, buffer, and
// the library's own choice).
void record_command(const std::string& mode) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string env = mode.empty() ? "" : "env CPTRACE_SINGLE=" + mode + " ";
  auto r = run(record_cmd(tmp / "t", "-- " + env + go_logger()), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(total_of(r.out), kGoroutines * kEvents) << r.out;
  auto got = go_events(tmp / "t");
  ASSERT_EQ(got.size(), 1u) << "one process";
  expect_exact(got.begin()->second, "CPTRACE_SINGLE=" + (mode.empty() ? std::string("(unset)") : mode));
}

}  // namespace

TEST(GoCgo, GoroutinesUnderCommandExactly) { record_command(""); }
TEST(GoCgo, GoroutinesThroughTheSiteExactly) { record_command("site"); }
TEST(GoCgo, GoroutinesThroughTheBufferExactly) { record_command("buffer"); }

// record --all, then three Go programs at once: each said hello (under Go's own
// SIGURG preemption) and was recorded from its first event.
TEST(GoCgo, ThreeProgramsUnderRecordAllExactly) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc rec(record_cmd(tmp / "t", "--ring-mb 64 --all"), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec, 60));
  std::vector<std::unique_ptr<Proc>> progs;
  std::set<pid_t> pids;  // taken now: a Proc forgets its pid once waited for
  for (int i = 0; i < 3; ++i) {
    std::string n = std::to_string(i);
    progs.push_back(std::make_unique<Proc>(go_logger(), tmp / ("go" + n + ".out"), tmp / ("go" + n + ".err")));
    pids.insert(progs.back()->pid);
  }
  for (auto& p : progs) {
    EXPECT_EQ(p->wait(120), 0) << read_file(p->err_path);
    EXPECT_EQ(total_of(read_file(p->out_path)), kGoroutines * kEvents);
  }
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");
  auto got = go_events(tmp / "t");
  ASSERT_EQ(got.size(), 3u) << "three processes";
  for (const auto& [pid, p] : got) {
    EXPECT_TRUE(pids.count(pid_t(pid))) << "pid " << pid << " is none of the three";
    expect_exact(p, "pid " + std::to_string(pid));
  }
}
