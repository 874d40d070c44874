// Java on the real kernel and a real JVM: cp.Cloudprofiler (jni/) logs through the
// nop5 JNI entry point of libcptrace_jni.so, `cptrace record` attaches to it by
// path (--lib) or to the running JVM (-p), and the trace holds exactly what the
// Java program emitted.
#include <gtest/gtest.h>

#include <x86intrin.h>

#include <map>
#include <optional>
#include <set>

#include "probe/attach_targets.h"
#include "cptrace.h"
#include "cptrace_probe_site.h"
#include "probe/probe_site.h"
#include "probe/proc_registry.h"
#include "collect/ring_drain.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t kThreadStride = 1000000000ull;  // JniWorkload: tuple = thread * 1e9 + i
constexpr int kThreads = 3, kEvents = 200000, kChannels = 2;

std::string jni_lib() { return (build_dir() / "libcptrace_jni.so").string(); }
std::string jar() { return (build_dir() / "cptrace.jar").string(); }

// Skips loudly when there is no JVM or the Java parts were not built.
#define REQUIRE_JVM()                                                                                        \
  do {                                                                                                       \
    if (resolve_in_path("java").empty())                                                                     \
      GTEST_SKIP() << "SKIPPED: no `java` on PATH (install openjdk-17-jdk-headless: "                        \
                      "tools/install-deps.sh)";                                                              \
    for (const std::string& f : {jar(), jni_lib(), (build_dir() / "tests/java/JniWorkload.class").string()}) \
      if (!fs::exists(f)) GTEST_SKIP() << "SKIPPED: " << f << " not built (no JDK at build time?)";          \
  } while (0)

std::string java_cmd(const std::string& args, const std::string& jvm_opts = "") {
  return "java -Xshare:auto " + jvm_opts + " -cp " + jar() + ":" + (build_dir() / "tests" / "java").string() +
         " JniWorkload " + args;
}

std::string workload_args(const std::string& mode) {
  return "--threads " + std::to_string(kThreads) + " --events " + std::to_string(kEvents) + " --channels " +
         std::to_string(kChannels) + " --mode " + mode;
}

// Per Java thread index: the tid that carried its tuples.
using ThreadTids = std::map<int, uint32_t>;

// The trace's user events are exactly the emitted set: every (thread, i) once, on
// channel "java.chan{i % 2}" by name, one native tid per Java thread (not the
// JVM's main thread), timestamps in emission order per thread and inside the
// recording. recorded + dropped == seen == emitted (+ `closes_expected` closes).
ThreadTids check_exact_set(const TraceReader& r, uint64_t closes_expected = kChannels) {
  ThreadTids tid_of_thread;
  EXPECT_FALSE(r.error()) << r.error()->what();
  const uint64_t t_start = r.meta()["start"]["tsc"].get<uint64_t>();
  const uint64_t t_stop = r.meta()["stop"]["tsc"].get<uint64_t>();
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> by_tuple;  // tuple -> (ts, tid)
  uint64_t dup = 0, wrong_channel = 0, outside = 0, closes = 0, jvm_pid = 0;
  r.for_each_event([&](const TraceEvent& e) {
    jvm_pid = e.pid;
    if (e.ts < t_start || e.ts > t_stop) outside++;
    if (e.kind == uint8_t(EventKind::ChannelClose)) {
      closes++;
      return;
    }
    uint64_t i = e.tuple % kThreadStride;
    if (r.channel_name(e.channel) != "java.chan" + std::to_string(i % kChannels)) wrong_channel++;
    if (!by_tuple.emplace(e.tuple, std::make_pair(e.ts, e.tid)).second) dup++;
  });
  EXPECT_EQ(dup, 0u);
  EXPECT_EQ(wrong_channel, 0u) << "a channel name did not resolve";
  EXPECT_EQ(outside, 0u) << "timestamps outside [start, stop] of the recording: wrong timebase?";
  EXPECT_EQ(closes, closes_expected);
  const Counters& c = r.counters();
  EXPECT_EQ(c.total_seen(), uint64_t(kThreads) * kEvents + closes_expected) << "the probes missed calls";
  EXPECT_EQ(by_tuple.size() + closes + c.total_dropped(), c.total_seen()) << "recorded + dropped != emitted";
  EXPECT_EQ(c.total_dropped(), 0u) << "drops with rings that hold the whole run";
  EXPECT_EQ(by_tuple.size(), size_t(kThreads) * kEvents);
  for (int t = 0; t < kThreads; ++t) {
    uint64_t prev_ts = 0;
    for (int i = 0; i < kEvents; ++i) {
      auto it = by_tuple.find(uint64_t(t) * kThreadStride + i);
      if (it == by_tuple.end()) {
        ADD_FAILURE() << "missing thread " << t << " event " << i;
        return tid_of_thread;
      }
      auto [ts, tid] = it->second;
      auto [at, fresh] = tid_of_thread.emplace(t, tid);
      if (!fresh && at->second != tid) {
        ADD_FAILURE() << "Java thread " << t << " logged from tids " << at->second << " and " << tid;
        return tid_of_thread;
      }
      if (ts < prev_ts) {
        ADD_FAILURE() << "thread " << t << " event " << i << " earlier than its predecessor";
        return tid_of_thread;
      }
      prev_ts = ts;
    }
  }
  std::set<uint32_t> tids;
  for (auto [t, tid] : tid_of_thread) {
    tids.insert(tid);
    EXPECT_NE(tid, jvm_pid) << "thread " << t << " recorded with the JVM's pid as tid";
  }
  EXPECT_EQ(tids.size(), size_t(kThreads)) << "three Java threads, three native tids";
  return tid_of_thread;
}

// "CHANNEL name id" lines of the workload: the ids Java computed match cp_channel_id.
void check_channel_ids(const std::string& out) {
  std::istringstream in(out);
  int seen = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string tag, name;
    uint64_t id = 0;
    if (!(l >> tag >> name >> id) || tag != "CHANNEL") continue;
    EXPECT_EQ(id, cp_channel_id(name.c_str())) << name;
    seen++;
  }
  EXPECT_EQ(seen, kChannels) << out;
}

// First bytes of `symbol` in the ELF file, as the kernel will see them.
std::vector<uint8_t> symbol_bytes(const std::string& elf, const std::string& symbol, size_t n) {
  auto off = elf_symbol_file_offset(elf, symbol);
  if (!off) return {};
  std::ifstream f(elf, std::ios::binary);
  std::vector<uint8_t> b(n);
  f.seekg(std::streamoff(*off));
  f.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
  return f ? b : std::vector<uint8_t>{};
}

}  // namespace

// The probe sites of libcptrace_jni.so are stamped sites (a TSC read, then
// the nop5 of the optimized uprobe path at +16, then ret): the JNI entry point
// itself, the Java batch site, and libcptrace's own sites linked in; the
// registry is exported so -p resolves names.
TEST(JniStub, ProbeSitesAreStampedNop5Sites) {
  if (!fs::exists(jni_lib())) GTEST_SKIP() << "SKIPPED: " << jni_lib() << " not built (no JDK?)";
  std::vector<uint8_t> site = {CP_SITE_STAMP_BYTES};
  for (uint8_t b : {CP_SITE_NOP_BYTES}) site.push_back(b);
  site.push_back(CP_SITE_RET);
  for (const char* s : {"Java_cp_Cloudprofiler_logTS", "cp_batch_submit_mono", "cp_logTS_site", "cp_batch_submit",
                        "cp_batch_submit_for", "cp_channel_announce", "cp_channel_closed"}) {
    EXPECT_EQ(symbol_bytes(jni_lib(), s, site.size()), site) << s;
    auto off = elf_symbol_file_offset(jni_lib(), s);
    ASSERT_TRUE(off.has_value()) << s;
    EXPECT_EQ(probe_site_file_offset(jni_lib(), s), std::optional<uint64_t>(*off + CP_SITE_NOP_OFFSET)) << s;
  }
  EXPECT_TRUE(elf_has_probe_site(jni_lib())) << "-p would not find the JNI library";
  // .bss symbol: no file bytes, but defined (the registry reader needs the symbol).
  EXPECT_FALSE(elf_symbol_file_offset(jni_lib(), "cptrace_registry").has_value());
}

// A Java batch (cp_batch_submit_mono) carries System.nanoTime() stamps: decoded
// as MonoNs so the reader converts them, where a C batch's rdtsc stamps are Tsc.
TEST(JniStub, MonoBatchRecordDecodesAsMonoNs) {
  auto rec = std::make_unique<cp_batch_rec>();
  rec->h = {CP_REC_BATCH_MONO, 1, 7, 8, 2};
  rec->e[0] = {5000, 3, 10};
  rec->e[1] = {6000, 4, 11};
  std::vector<TraceEvent> out;
  ChannelInfo ch;
  ASSERT_EQ(RingDrain::decode(rec.get(), sizeof *rec, out, &ch), 2);
  EXPECT_EQ(out[1].ts, 6000u);
  EXPECT_EQ(out[1].channel, 4u);
  EXPECT_EQ(out[1].tuple, 11u);
  EXPECT_EQ(out[1].tid, 8u);
  EXPECT_EQ(out[0].timebase, uint8_t(Timebase::MonoNs));
  EXPECT_EQ(out[1].timebase, uint8_t(Timebase::MonoNs));
  rec->h.kind = CP_REC_BATCH;
  out.clear();
  ASSERT_EQ(RingDrain::decode(rec.get(), sizeof *rec, out, &ch), 2);
  EXPECT_EQ(out[0].timebase, uint8_t(Timebase::Tsc));
}

TEST(Jni, NoRecorderAttachedRunsAndExitsNormally) {
  REQUIRE_JVM();
  TempDir tmp;
  // The library named by the system property (the other tests find it beside the jar).
  auto r = run(java_cmd(workload_args("single"), "-Dcptrace.jni.lib=" + jni_lib()), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("DONE " + std::to_string(kThreads * kEvents)), std::string::npos) << r.out;
  check_channel_ids(r.out);
  auto b = run(java_cmd(workload_args("batch")), tmp);
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("DONE"), std::string::npos) << b.out;
}

// Also: Java's logTS events carry the TSC the JNI site read at the call
// (timebase Tsc, no kernel clock), so each lies inside the TSC window of the
// JVM's run as this test reads it (lfence-ordered), every one.
TEST(Jni, RecordByLibExactSet) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  TempDir tmp;
  // 600k records of 48 bytes: 32 MiB rings hold the whole run even on one CPU.
  _mm_lfence();
  uint64_t t0 = __rdtsc();
  auto r = run(
      record_cmd(tmp / "trace", "--ring-mb 32 --lib " + jni_lib() + " -- " + java_cmd(workload_args("single"))), tmp);
  _mm_lfence();
  uint64_t t1 = __rdtsc();
  ASSERT_EQ(r.status, 0) << r.err;
  check_channel_ids(r.out);
  TraceReader tr(tmp / "trace");
  EXPECT_TRUE(tr.meta().value("complete", false));
  check_exact_set(tr);
  uint64_t user = 0, not_tsc = 0, outside = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    user++;
    not_tsc += !is_tsc(e.timebase);
    outside += e.ts < t0 || e.ts > t1;
  });
  EXPECT_EQ(user, uint64_t(kThreads) * kEvents);
  EXPECT_EQ(not_tsc, 0u) << "Java single events are stamped by the JNI site's rdtsc";
  EXPECT_EQ(outside, 0u) << "events stamped outside the JVM run [" << t0 << ", " << t1 << "]";
}

TEST(Jni, BatchExactSet) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "trace", "--ring-mb 64 --lib " + jni_lib() + " -- " + java_cmd(workload_args("batch"))),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  check_exact_set(tr);
}

// A JVM in a time namespace whose CLOCK_MONOTONIC runs 1000 s ahead of the host's
// (`unshare --time --monotonic 1000`): its System.nanoTime() batch stamps carry that
// offset, and convert onto the host's clock only through the namespace's offsets
// (/proc/PID/timens_offsets, read by the recorder). Taken as host time they would
// land 1000 s after the recording: check_exact_set finds every event inside it.
TEST(Jni, BatchInTimeNamespaceLandsInsideTheRecording) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  TempDir tmp;
  auto r =
      run(record_cmd(tmp / "trace", "--ring-mb 64 --lib " + jni_lib() + " -- unshare --time --monotonic 1000 --fork " +
                                        java_cmd(workload_args("batch"))),
          tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  check_exact_set(tr);
  bool offset_seen = false;
  for (const auto& [pid, e] : tr.pids().by_pid)
    if (e.mono_offset_ns == 1000'000'000'000) offset_seen = true;
  EXPECT_TRUE(offset_seen) << "no process of the trace has the namespace's 1000 s offset";
}

// A Batch never flushed nor closed, its thread parked, the JVM ending without
// waiting for it (System.exit, Runtime.halt, SIGKILL): every event still
// reaches the trace, read by the recorder as each thread dies.
static void batch_never_closed(const std::string& end) {
  TempDir tmp;
  std::string args = workload_args("batch-open") + " --end " + end;
  Proc rec(record_cmd(tmp / "trace", "--ring-mb 64 --lib " + jni_lib() + " -- " + java_cmd(args)), tmp / "r.out",
           tmp / "r.err");
  if (end == "kill") {
    ASSERT_TRUE(rec.wait_for("KILL ME", 120)) << read_file(tmp / "r.err");
    int pid = 0;
    std::string out = read_file(tmp / "r.out");
    ASSERT_EQ(sscanf(out.c_str() + out.find("READY "), "READY %d", &pid), 1) << out;
    kill(pid, SIGKILL);
    EXPECT_EQ(rec.wait(120), 128 + SIGKILL) << "record exits as its command did: " << read_file(tmp / "r.err");
  } else {
    EXPECT_EQ(rec.wait(120), 0) << read_file(tmp / "r.err");
  }
  TraceReader tr(tmp / "trace");
  check_exact_set(tr, 0);
}

TEST(Jni, BatchNeverClosedSurvivesSystemExit) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  batch_never_closed("exit");
}

TEST(Jni, BatchNeverClosedSurvivesHalt) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  batch_never_closed("halt");
}

TEST(Jni, BatchNeverClosedSurvivesSigkill) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  batch_never_closed("kill");
}

// Late attach: channels were opened before the recorder existed (names come from
// the registry inside libcptrace_jni.so, found among the JVM's mappings). The
// recorded tids are the JVM's native threads, named after the Java threads.
static void late_attach(const std::string& mode) {
  TempDir tmp;
  std::string go = tmp / "go", hold = tmp / "hold";
  Proc jvm(java_cmd(workload_args(mode) + " --wait-file " + go + " --hold-file " + hold), tmp / "w.out", tmp / "w.err");
  ASSERT_TRUE(jvm.wait_for("READY", 60)) << read_file(tmp / "w.err");
  EXPECT_EQ(targets_of_process(jvm.pid), std::vector<std::string>{fs::canonical(jni_lib()).string()});
  // Rings that hold the whole burst (the batch path outruns one drain thread).
  Proc rec(record_cmd(tmp / "trace", "--ring-mb 64 -p " + std::to_string(jvm.pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  std::ofstream(go).put('\n');
  ASSERT_TRUE(jvm.wait_for("DONE", 120)) << read_file(tmp / "w.err");
  kill(rec.pid, SIGINT);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  // The JVM closes its channels only after the hold, i.e. after this recording.
  ThreadTids tids = check_exact_set(tr, 0);
  // The documented mapping from a recorded tid to the Java thread's name.
  ASSERT_EQ(tids.size(), size_t(kThreads));
  for (auto [t, tid] : tids) {
    std::string comm = read_file("/proc/" + std::to_string(jvm.pid) + "/task/" + std::to_string(tid) + "/comm");
    EXPECT_EQ(comm, "cp-worker-" + std::to_string(t) + "\n") << "tid " << tid;
  }
  std::ofstream(hold).put('\n');
  EXPECT_EQ(jvm.wait(60), 0) << read_file(tmp / "w.err");
}

TEST(Jni, LateAttachToRunningJvm) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  late_attach("single");
}

TEST(Jni, LateAttachToRunningJvmBatch) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  late_attach("batch");
}

// --lib without -p or a command: every JVM that loads the library is recorded,
// each with its own pid and its own exact set.
TEST(Jni, RecordByLibCoversEveryJvm) {
  REQUIRE_BPF();
  REQUIRE_JVM();
  TempDir tmp;
  constexpr int kPerThread = 20000;
  Proc rec(record_cmd(tmp / "trace", "--lib " + jni_lib()), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  std::string args =
      "--threads " + std::to_string(kThreads) + " --events " + std::to_string(kPerThread) + " --channels 2 --mode ";
  Proc a(java_cmd(args + "single"), tmp / "a.out", tmp / "a.err");
  Proc b(java_cmd(args + "batch"), tmp / "b.out", tmp / "b.err");
  const pid_t pa = a.pid, pb = b.pid;  // `exec java`: the JVM keeps the shell's pid
  EXPECT_EQ(a.wait(), 0) << read_file(tmp / "a.err");
  EXPECT_EQ(b.wait(), 0) << read_file(tmp / "b.err");
  kill(rec.pid, SIGINT);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error());
  std::map<uint32_t, std::set<uint64_t>> tuples;  // pid -> tuples
  uint64_t user = 0, closes = 0, unnamed = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::ChannelClose)) {
      closes++;
      return;
    }
    user++;
    tuples[e.pid].insert(e.tuple);
    unnamed += tr.channel_name(e.channel).rfind("java.chan", 0) != 0;
  });
  EXPECT_EQ(unnamed, 0u);
  EXPECT_EQ(closes, 2u * kChannels);
  const uint64_t per_jvm = uint64_t(kThreads) * kPerThread;
  EXPECT_EQ(tr.counters().total_seen(), 2 * (per_jvm + kChannels));
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  EXPECT_EQ(user + closes + tr.counters().total_dropped(), tr.counters().total_seen());
  ASSERT_EQ(tuples.size(), 2u) << "events from other than the two JVMs";
  std::set<uint64_t> emitted;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) emitted.insert(uint64_t(t) * kThreadStride + i);
  ASSERT_EQ(emitted.size(), per_jvm);
  for (pid_t pid : {pa, pb}) EXPECT_TRUE(tuples[uint32_t(pid)] == emitted) << "pid " << pid;
}
