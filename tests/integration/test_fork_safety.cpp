// Fork safety on the real kernel: a pre-fork server (tests/workloads/prefork.c)
// recorded in every mode, with a second recorder on the same library that
// detaches at a random moment. No process of the tree may die, and what the
// recorded process emitted is in the trace exactly (recorded + dropped). And
// forkgate (tests/workloads/forkgate.c): children that meet the recorder's int3
// over the call they inherited, then the detach, before, after or during their
// repair and their first hit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

std::string prefork() { return (build_dir() / "tests" / "prefork").string(); }
std::string forkgate() { return (build_dir() / "tests" / "forkgate").string(); }
std::string lib() { return std::filesystem::canonical(build_dir() / "libcptrace.so").string(); }

// The prefork summary line of `out` (its last line starting with '{').
nlohmann::json summary(const std::string& out) {
  auto at = out.rfind("{\"pid\"");
  EXPECT_NE(at, std::string::npos) << "no summary in: " << out;
  if (at == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
}

// User events per channel name; every (channel, tuple) once on "server".
std::map<std::string, uint64_t> per_channel(const TraceReader& tr, std::set<uint64_t>* server_tuples) {
  std::map<std::string, uint64_t> n;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    std::string name = tr.channel_name(e.channel);
    n[name]++;
    if (name == "server") {
      EXPECT_TRUE(server_tuples->insert(e.tuple).second) << "tuple twice: " << e.tuple;
    }
  });
  return n;
}

// Every generation of a prefork run whose server was recorded (and followed)
// from its start: exact counts per channel, the server's tuples once each,
// nothing dropped at these rates.
void expect_prefork_tree_exact(const std::string& dir, uint64_t rounds, uint64_t workers, uint64_t events) {
  TraceReader tr(dir);
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::set<uint64_t> tuples;
  auto n = per_channel(tr, &tuples);
  EXPECT_EQ(tr.counters().total_dropped(), 0u) << "drops at this rate";
  EXPECT_EQ(n["server"], rounds * 2 * events);
  EXPECT_EQ(tuples.size(), rounds * 2 * events);
  EXPECT_EQ(n["worker"], rounds * workers * 4 * events);
  EXPECT_EQ(n["worker.child"], rounds * workers * 2 * events);
}

// The recorded process's events are all there: tuples 0..emitted-1, once each,
// or counted as dropped.
void expect_parent_exact(const std::string& dir, uint64_t emitted) {
  TraceReader tr(dir);
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::set<uint64_t> tuples;
  auto n = per_channel(tr, &tuples);
  EXPECT_EQ(n.count("worker") + n.count("worker.child"), 0u) << "a child's event in a one-process trace";
  EXPECT_EQ(tuples.size() + tr.counters().total_dropped(), emitted);
  if (!tuples.empty()) {
    EXPECT_LT(*tuples.rbegin(), emitted);
  }
}

// A forkgate run (tests/workloads/forkgate.c) recorded with -p from before its
// parent's first event: the parent's site is the kernel's call when it forks,
// and every child is held before the library's repair until the recorder,
// following it, has written its int3 over its copy of that call.
struct GateRun {
  TempDir tmp;
  std::unique_ptr<Proc> gate, rec;

  // Started, recorded, and let go (SIGUSR1). `args`: forkgate's options.
  void start(const std::string& args) {
    gate = std::make_unique<Proc>("env CPTRACE_SINGLE=site " + forkgate() + " --lib " + lib() + " --events " +
                                      std::to_string(kEvents) + " " + args,
                                  tmp / "g.out", tmp / "g.err");
    ASSERT_TRUE(gate->wait_for("READY", 20)) << read_file(tmp / "g.err");
    rec =
        std::make_unique<Proc>(record_cmd(tmp / "t", "-p " + std::to_string(gate->pid)), tmp / "r.out", tmp / "r.err");
    ASSERT_TRUE(attached(*rec));
    ASSERT_EQ(kill(gate->pid, SIGUSR1), 0);
  }
  void stop_recorder() {
    kill(rec->pid, SIGINT);
    EXPECT_EQ(rec->wait(), 0) << read_file(tmp / "r.err");
  }
  // The workload's exit status (0: every child exited with status 0) and summary.
  nlohmann::json finish() {
    EXPECT_EQ(gate->wait(), 0) << read_file(tmp / "g.out") << read_file(tmp / "g.err");
    return summary(read_file(tmp / "g.out"));
  }
  static constexpr uint64_t kEvents = 5;
};

// Every child of a gate run alive, and each one met the bytes that used to
// kill it: an int3 over the copied call (forkgate's stall makes that order
// certain instead of a matter of scheduling).
void expect_children_safe(const nlohmann::json& s, int children, bool every_child_patched) {
  EXPECT_EQ(s.value("children", -1), children);
  EXPECT_EQ(s.value("ok", -1), children);
  EXPECT_EQ(s.value("killed", -1), 0) << "of which SIGILL: " << s.value("sigill", -1);
  ASSERT_EQ(s.value("parent_call", 0), 1) << "the kernel did not optimize the parent's site";
  if (every_child_patched) {
    EXPECT_EQ(s.value("int3_over_call", -1), children);
    EXPECT_EQ(s.value("stall_timeouts", -1), 0);
  }
}

}  // namespace

// The gate case: children forked while the recorder is attached (which
// follows them and patches their copy of the site before their repair), the
// recorder stops, then each child's first cp_logTS. Before the repair mapped
// such pages again, the detach left `0f` + the call's displacement there and
// every child died of SIGILL.
TEST(ForkSafety, GateForkedAttachedDetachThenFirstHit) {
  REQUIRE_BPF();
  constexpr int kChildren = 300;
  GateRun g;
  g.start("--serial --hit-after-signal --children " + std::to_string(kChildren));
  ASSERT_TRUE(g.gate->wait_for("FORKED", 60)) << read_file(g.tmp / "g.err");
  g.stop_recorder();
  kill(g.gate->pid, SIGUSR2);
  expect_children_safe(g.finish(), kChildren, true);
  TraceReader tr(g.tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::set<uint64_t> tuples;
  auto n = per_channel(tr, &tuples);
  EXPECT_EQ(n["gate"], GateRun::kEvents);
  EXPECT_EQ(n["child"], 0u) << "a child event after the recorder stopped";
}

// Same children, recorder still attached at their hits: alive, and every event
// of every child recorded exactly once.
TEST(ForkSafety, GateForkedAttachedFirstHitRecorded) {
  REQUIRE_BPF();
  constexpr int kChildren = 300;
  GateRun g;
  g.start("--serial --children " + std::to_string(kChildren));
  auto s = g.finish();
  g.stop_recorder();
  expect_children_safe(s, kChildren, true);
  TraceReader tr(g.tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::set<uint64_t> child_tuples;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User) && tr.channel_name(e.channel) == "child") {
      EXPECT_TRUE(child_tuples.insert(e.tuple).second) << "child tuple twice: " << e.tuple;
    }
  });
  std::set<uint64_t> tuples;
  auto n = per_channel(tr, &tuples);
  EXPECT_EQ(tr.counters().total_dropped(), 0u) << "drops at this rate";
  EXPECT_EQ(n["gate"], GateRun::kEvents);
  EXPECT_EQ(n["child"], kChildren * GateRun::kEvents);
  EXPECT_EQ(child_tuples.size(), kChildren * GateRun::kEvents);
  if (!child_tuples.empty()) {
    EXPECT_LT(*child_tuples.rbegin(), kChildren * GateRun::kEvents);
  }
}

// The detach races the children: the workload stops its recorder itself just
// before a random fork. The children before it hold the recorder's int3 over
// their copied call and take their first hit up to 0.3 s later, before or
// after the detach; those right after it are forked, patched and repaired
// while the recorder detaches; every fourth one execs. None may die, whichever
// side of the detach each one lands on (before the fix: 31 and 67 of 200 died
// of SIGILL in two such runs).
TEST(ForkSafety, GateDetachRacesChildRepair) {
  REQUIRE_BPF();
  constexpr int kChildren = 200;
  std::random_device rd;
  for (int run_i = 0; run_i < 2; run_i++) {
    unsigned stop_at = 20 + rd() % (kChildren - 40);
    SCOPED_TRACE("recorder stopped before child " + std::to_string(stop_at));
    TempDir tmp;
    Proc gate("env CPTRACE_SINGLE=site " + forkgate() + " --lib " + lib() +
                  " --serial --stall-ms 100 --hit-delay-us 300000 --exec-every 4 --children " +
                  std::to_string(kChildren) + " --stop-recorder-at " + std::to_string(stop_at) + " --recorder-file " +
                  (tmp / "rec.pid"),
              tmp / "g.out", tmp / "g.err");
    ASSERT_TRUE(gate.wait_for("READY", 20)) << read_file(tmp / "g.err");
    Proc rec(record_cmd(tmp / "t", "-p " + std::to_string(gate.pid)), tmp / "r.out", tmp / "r.err");
    ASSERT_TRUE(attached(rec));
    std::ofstream(tmp / "rec.pid") << rec.pid << "\n";
    ASSERT_EQ(kill(gate.pid, SIGUSR1), 0);
    EXPECT_EQ(gate.wait(), 0) << read_file(tmp / "g.out") << read_file(tmp / "g.err");
    EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
    auto s = summary(read_file(tmp / "g.out"));
    expect_children_safe(s, kChildren, false);
    EXPECT_GT(s.value("int3_over_call", 0), 0) << "no child met the recorder's int3 over its call";
  }
}

// -- CMD: the server and its whole tree survive and are recorded, every
// generation exactly (the recorder follows the children it forks).
TEST(ForkSafety, PreforkServerUnderCommand) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t", "-- " + prefork() + " --rounds 5 --events 50"), tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto s = summary(r.out);
  EXPECT_EQ(s.value("failed", -1), 0);
  EXPECT_EQ(s.value("children", 0), 40);
  expect_prefork_tree_exact(tmp / "t", 5, 4, 50);
}

// The same tree with single events buffered (as on kernels before 6.18): each
// generation forks while the parent's flusher may hold a claim or a lock, and
// starts its own; every event of every process exactly once.
TEST(ForkSafety, PreforkServerWithBufferedSingles) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r =
      run("env CPTRACE_SINGLE=buffer " + record_cmd(tmp / "t", "-- " + prefork() + " --rounds 5 --events 50"), tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto s = summary(r.out);
  EXPECT_EQ(s.value("failed", -1), 0);
  EXPECT_EQ(s.value("children", 0), 40);
  expect_prefork_tree_exact(tmp / "t", 5, 4, 50);
}

// --no-inherit: the server alone, exactly; its tree survives unrecorded.
TEST(ForkSafety, PreforkServerUnderCommandNoInherit) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t", "--no-inherit -- " + prefork() + " --rounds 10 --events 100"), tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto s = summary(r.out);
  EXPECT_EQ(s.value("failed", -1), 0);
  EXPECT_EQ(s.value("children", 0), 80);
  expect_parent_exact(tmp / "t", s.value("parent_emitted", uint64_t(0)));
}

// --lib alone covers every process of the library: each child's sites come
// back as breakpoints after fork, so workers and their children are recorded
// exactly too, not only kept alive.
TEST(ForkSafety, PreforkServerUnderLibRecordsEveryGeneration) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc rec(record_cmd(tmp / "t", "--lib " + lib()), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  constexpr uint64_t kEvents = 50, kRounds = 5, kWorkers = 4;
  auto r = run(prefork() + " --rounds 5 --workers 4 --events 50", tmp);
  kill(rec.pid, SIGINT);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(summary(r.out).value("failed", -1), 0);
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::set<uint64_t> tuples;
  auto n = per_channel(tr, &tuples);
  uint64_t dropped = tr.counters().total_dropped();
  EXPECT_EQ(dropped, 0u) << "drops at this rate";
  EXPECT_EQ(n["server"], kRounds * 2 * kEvents);
  EXPECT_EQ(n["worker"], kRounds * kWorkers * 4 * kEvents);
  EXPECT_EQ(n["worker.child"], kRounds * kWorkers * 2 * kEvents);
}

// -p, with a second recorder (--lib: every process of the same library) that
// stops at a random moment of the run, so detach races the forks. The -p
// recorder follows the workers forked after it attached: all exact.
TEST(ForkSafety, PreforkServerUnderPidWhileSecondRecorderDetachesAtRandom) {
  REQUIRE_BPF();
  std::random_device rd;
  for (int run_i = 0; run_i < 3; run_i++) {
    unsigned delay_ms = rd() % 400;
    SCOPED_TRACE("second recorder stopped after " + std::to_string(delay_ms) + " ms");
    TempDir tmp;
    Proc w(prefork() + " --wait-signal --rounds 10 --events 100 --pace-ms 10", tmp / "w.out", tmp / "w.err");
    ASSERT_TRUE(w.wait_for("READY", 20)) << read_file(tmp / "w.err");
    Proc rec(record_cmd(tmp / "t", "-p " + std::to_string(w.pid)), tmp / "r.out", tmp / "r.err");
    Proc rec2(record_cmd(tmp / "t2", "--lib " + lib()), tmp / "r2.out", tmp / "r2.err");
    ASSERT_TRUE(attached(rec));
    ASSERT_TRUE(attached(rec2));
    kill(w.pid, SIGUSR1);
    usleep(delay_ms * 1000);
    kill(rec2.pid, SIGINT);
    EXPECT_EQ(rec2.wait(), 0) << read_file(tmp / "r2.err");
    EXPECT_EQ(w.wait(), 0) << read_file(tmp / "w.out");
    auto s = summary(read_file(tmp / "w.out"));
    EXPECT_EQ(s.value("failed", -1), 0);
    EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
    expect_prefork_tree_exact(tmp / "t", 10, 4, 100);
  }
}

// `cptrace check` measures both: whether this kernel kills a child forked after
// an optimized hit (raw fork, no repair) and whether libcptrace's repair holds.
TEST(ForkSafety, CheckReportsKernelProblemAndRepair) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(cptrace_bin() + " check", tmp);
  auto line = [&](const std::string& what) {
    auto at = r.out.find(what);
    if (at == std::string::npos) return std::string();
    auto start = r.out.rfind('\n', at);
    start = start == std::string::npos ? 0 : start + 1;
    return r.out.substr(start, r.out.find('\n', at) - start);
  };
  std::string problem = line("kernel fork problem"), repair = line("fork repair (libcptrace)");
  ASSERT_FALSE(problem.empty()) << r.out;
  EXPECT_TRUE(problem.find("yes:") != std::string::npos || problem.find("no:") != std::string::npos) << problem;
  EXPECT_EQ(repair.rfind("ok", 0), 0u) << repair;
  std::string follow = line("follow children");
  EXPECT_EQ(follow.rfind("ok", 0), 0u) << follow;
  // A child that dies of the kernel's problem is a finding, not a crash of cptrace.
  EXPECT_EQ(r.err.find("fatal signal"), std::string::npos) << r.err;
}
