// End to end on the real kernel: a workload calls cp_logTS, `cptrace record`
// captures it through uprobes, and the trace holds exactly what was emitted.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <functional>
#include <sys/mount.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cptrace_registry.h"
#include "record_util.h"
#include "test_util.h"
#include "probe/probe_site.h"
#include "probe/proc_registry.h"
#include "clock/clock_transform.h"
#include "record/recorder.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t kThreadStride = 1000000000ull;  // workload: tuple = thread * 1e9 + i

// What the workload emits, recomputed from its parameters: for thread t and
// event i, tuple t*1e9+i on channel "chan{i % channels}".
struct Expect {
  int threads, events, channels;
};

// Recorded user events and channel closes; every user event recorded once.
std::pair<uint64_t, uint64_t> count_recorded(const TraceReader& tr) {
  uint64_t user = 0, closes = 0;
  std::set<uint64_t> tuples;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User)) {
      user++;
      tuples.insert(e.tuple);
    } else {
      closes++;
    }
  });
  EXPECT_EQ(tuples.size(), user) << "an event recorded twice";
  return {user, closes};
}

// Asserts the trace's user events are exactly the emitted set, that per-thread
// timestamps follow emission order, and that every channel name resolves.
void check_exact_set(const TraceReader& r, const Expect& x) {
  ASSERT_FALSE(r.error()) << r.error()->what();
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> by_tuple;  // tuple -> (ts, tid)
  std::map<uint32_t, int> thread_of_tid;
  uint64_t dup = 0, wrong_channel = 0, closes = 0;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::ChannelClose)) {
      closes++;
      return;
    }
    int t = int(e.tuple / kThreadStride);
    int i = int(e.tuple % kThreadStride);
    if (r.channel_name(e.channel) != "chan" + std::to_string(i % x.channels)) wrong_channel++;
    if (!by_tuple.emplace(e.tuple, std::make_pair(e.ts, e.tid)).second) dup++;
    auto [it, fresh] = thread_of_tid.emplace(e.tid, t);
    if (!fresh) {
      EXPECT_EQ(it->second, t) << "one tid carries tuples of two threads";
    }
  });
  EXPECT_EQ(dup, 0u);
  EXPECT_EQ(wrong_channel, 0u);
  EXPECT_EQ(r.counters().total_dropped(), 0u) << "drops at this rate";
  ASSERT_EQ(by_tuple.size(), size_t(x.threads) * x.events);
  // Exact set: every (thread, i) present (size equal + all in range => equal).
  for (int t = 0; t < x.threads; ++t) {
    uint64_t prev_ts = 0;
    for (int i = 0; i < x.events; ++i) {
      auto it = by_tuple.find(uint64_t(t) * kThreadStride + i);
      ASSERT_NE(it, by_tuple.end()) << "missing thread " << t << " event " << i;
      ASSERT_GE(it->second.first, prev_ts) << "thread " << t << " event " << i << " earlier than its predecessor";
      prev_ts = it->second.first;
    }
  }
  // Nothing lost, everything counted: recorded + dropped == seen, exactly.
  EXPECT_EQ(by_tuple.size() + closes + r.counters().total_dropped(), r.counters().total_seen());
  EXPECT_EQ(int(thread_of_tid.size()), x.threads);
}

// User events in a trace still being written, read again every 0.2 s until
// there are `want` of them (or 30 s passed): what reached it meanwhile.
uint64_t live_user_events(const std::string& trace, uint64_t want) {
  uint64_t seen = 0;
  for (int i = 0; i < 150 && seen < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    TraceReader live(trace);
    seen = 0;
    live.for_each_event([&](const TraceEvent& e) { seen += e.kind == uint8_t(EventKind::User); });
  }
  return seen;
}

// 4 threads x 250,000 events on 3 channels through `mode` (single or batch),
// recorded with `options` into 64 MiB rings: the exact set arrives. `more`
// checks the rest of the test on the same trace.
// `env`: assignments put in the recorder's (and so the workload's) environment.
void record_million_exact(const std::string& options, const char* mode,
                          const std::function<void(const TraceReader&)>& more = {}, const std::string& env = "") {
  TempDir tmp;
  auto r = run((env.empty() ? "" : "env " + env + " ") +
                   record_cmd(tmp / "trace", "--ring-mb 64 " + options + " -- " + workload() +
                                                 " --threads 4 --events 250000 --channels 3 --mode " + mode),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  check_exact_set(tr, Expect{4, 250000, 3});
  if (more) more(tr);
}

}  // namespace

TEST(Record, MillionEventsFromFourThreadsExactSet) {
  REQUIRE_BPF();
  // 1M records of 48 bytes (with the ring's header): 64 MiB rings hold the whole run
  // even if every thread ran on one CPU, so no drop can happen whatever the speed of
  // the uprobes against the drain (that race is `make bench`'s; DropsAreCountedExactly
  // checks the accounting when rings overflow).
  record_million_exact(
      "", "single", [](const TraceReader& tr) { EXPECT_TRUE(tr.meta().value("complete", false)); },
      "CPTRACE_SINGLE=site");
}

// Single events through the thread buffers, as cp_logTS sends them by default
// (lib/single_route.c): the exact set, each event with the tid of
// the thread that logged it (check_exact_set: one tid per thread).
TEST(Record, BufferedSinglesExactSet) {
  REQUIRE_BPF();
  record_million_exact("", "single", {}, "CPTRACE_SINGLE=buffer");
}

// Buffered singles while a signal handler logs inside the thread's own calls
// (every 50 us): the handler's events and the thread's, each exactly once, all
// with the thread's tid.
TEST(Record, BufferedSinglesFromASignalHandlerExactSet) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r =
      run("env CPTRACE_SINGLE=buffer " +
              record_cmd(tmp / "trace", "--ring-mb 64 -- " + workload() +
                                            " --threads 2 --events 500000 --channels 1 --mode single --signal-us 50"),
          tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  const uint64_t sig = report["signal_events"].get<uint64_t>();
  const uint32_t tid0 = report["thread_list"][0]["tid"].get<uint32_t>();
  EXPECT_GT(sig, 100u) << "the timer interrupted the thread";
  TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error());
  std::set<uint64_t> main_tuples, sig_tuples;
  uint64_t user = 0, sig_wrong_tid = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    user++;
    if (tr.channel_name(e.channel) == "sig") {
      sig_tuples.insert(e.tuple);
      sig_wrong_tid += e.tid != tid0;
    } else {
      main_tuples.insert(e.tuple);
    }
  });
  EXPECT_EQ(user, main_tuples.size() + sig_tuples.size()) << "an event recorded twice";
  EXPECT_EQ(main_tuples.size(), 1000000u);
  ASSERT_EQ(sig_tuples.size(), sig);
  EXPECT_EQ(*sig_tuples.begin(), 999000000000ull);
  EXPECT_EQ(*sig_tuples.rbegin(), 999000000000ull + sig - 1);
  EXPECT_EQ(sig_wrong_tid, 0u);
  EXPECT_EQ(tr.event_count() + tr.counters().total_dropped(), tr.counters().total_seen());
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
}

TEST(Record, BatchPathExactSet) {
  REQUIRE_BPF();
  // Flat out, the batch path emits 1M events (24 MB of entries) in ~20 ms, faster
  // than one drain thread copies them on two cores; 64 MiB rings absorb the burst.
  // (Drops under a burst too large for the rings: DropsAreCountedExactly.)
  record_million_exact("", "batch");
}

// The recorder ends with its own CPU per recorded event, the figure meta.json's
// collector.cpu_s_attached gives over recorded_events.
TEST(Record, EndsWithItsOwnCpuPerEvent) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "trace",
                          "--ring-mb 64 -- " + workload() + " --threads 4 --events 250000 --channels 3 --mode batch"),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  check_exact_set(tr, Expect{4, 250000, 3});
  const nlohmann::json& cpu = tr.meta().at("collector").at("cpu_s_attached");
  const double cpu_s = cpu.at("user").get<double>() + cpu.at("system").get<double>();
  EXPECT_GT(cpu_s, 0) << "moving a million events took no CPU";
  const std::string key = "recorder CPU ";
  size_t at = r.err.find(key);
  ASSERT_NE(at, std::string::npos) << r.err;
  const double printed = std::stod(r.err.substr(at + key.size()));
  const double per_event = cpu_s * 1e9 / double(tr.meta().at("recorded_events").get<uint64_t>());
  EXPECT_NEAR(printed, per_event, 0.051) << r.err;
  printf("  [record] recorder CPU %.1f ns per event (1M batch events, 4 threads)\n", printed);
}

// Event frames at the fast zstd level (the level a busy recorder switches to)
// read back as exactly the events emitted.
TEST(Record, FastZstdLevelBatchExactSet) {
  REQUIRE_BPF();
  record_million_exact("--zstd-level -5", "batch");
}

// The sizing knobs change how often the drain wakes and how events are cut into
// frames, never which events arrive: the smallest wakeup (a wakeup every few
// dozen records) and the smallest blocks still give the exact set, in frames of
// at most 1024 events.
TEST(Record, SmallestWakeupAndBlocksExactSet) {
  REQUIRE_BPF();
  record_million_exact("--wakeup-kib 4 --block-events 1024", "batch",
                       [](const TraceReader& tr) { EXPECT_GE(tr.event_frame_count(), 1000000u / 1024); });
}

// Rings far too small for the burst: events are dropped, and every one of them
// is counted, so recorded + dropped == seen still holds exactly. The drain is
// woken only when a ring is full (the wakeup is the whole ring): a drain that
// keeps up with 1 MiB rings on a fast host would otherwise prove nothing.
TEST(Record, DropsAreCountedExactly) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "trace", "--ring-mb 1 --wakeup-kib 1024 -- " + workload() +
                                             " --threads 4 --events 500000 --channels 3 --mode batch"),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error());
  auto [user, closes] = count_recorded(tr);
  const Counters& c = tr.counters();
  EXPECT_GT(c.total_dropped(), 0u) << "1 MiB rings did not overflow; the test proves nothing";
  // The probes saw every emitted event: 2M logs + 3 channel closes (main thread).
  EXPECT_EQ(c.total_seen(), 4u * 500000 + 3);
  EXPECT_EQ(user + closes + c.total_dropped(), c.total_seen());
}

// Two threads pinned to one CPU, logging flat out at the site, share that CPU's
// stage, ring and counters. The stage is touched with preemption disabled and every counter
// update is atomic (bpf/cptrace.bpf.c says why), so the counts stay exact
// whichever thread the scheduler runs when: `seen` is every call, and
// recorded + dropped == seen. `pin_recorder`: the recorder's drain shares the
// CPU as well, behind 1 MiB rings; whether it falls behind and events are
// dropped depends on the host (printed: none on the hosts seen so far), and the
// accounting must cover it either way.
static void pinned_threads_count_exactly(const std::string& ring, bool pin_recorder) {
  TempDir tmp;
  constexpr int kEvents = 300000;
  auto r = run((pin_recorder ? "taskset -c 0 " : "") +
                   record_cmd(tmp / "trace", ring + " -- taskset -c 0 env CPTRACE_SINGLE=site " + workload() +
                                                 " --threads 2 --events " + std::to_string(kEvents) +
                                                 " --channels 1 --mode single"),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  uint64_t user = 0, closes = 0, switches = 0, off_cpu = 0;
  uint32_t last_tid = 0;
  std::set<uint64_t> tuples;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) {
      closes += e.kind == uint8_t(EventKind::ChannelClose);
      return;
    }
    user++;
    tuples.insert(e.tuple);
    off_cpu += e.cpu != 0;
    switches += last_tid && e.tid != last_tid;
    last_tid = e.tid;
  });
  const Counters& c = tr.counters();
  fmt::print("pinned {}: {} recorded, {} dropped, the threads took turns {} times\n", ring, user, c.total_dropped(),
             switches);
  EXPECT_EQ(off_cpu, 0u) << "events from another CPU: the threads were not pinned";
  EXPECT_GE(switches, 2u) << "the threads never took turns on the CPU; the test proves nothing";
  EXPECT_EQ(tuples.size(), user) << "an event recorded twice";
  EXPECT_EQ(c.total_seen(), 2u * kEvents + 1) << "every call seen (+1 channel close)";
  EXPECT_EQ(user + closes + c.total_dropped(), c.total_seen());
  EXPECT_EQ(c.total_filtered(), 0u);
}

TEST(Record, ThreadsPinnedToOneCpuCountExactly) {
  REQUIRE_BPF();
  pinned_threads_count_exactly("--ring-mb 64", false);
}

TEST(Record, ThreadsAndRecorderOnOneCpuCountExactly) {
  REQUIRE_BPF();
  pinned_threads_count_exactly("--ring-mb 1", true);
}

TEST(Record, LateAttachToRunningProcessResolvesNames) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc w(workload() + " --threads 2 --events 50000 --channels 3 --mode single --wait-signal", tmp / "w.out",
         tmp / "w.err");
  ASSERT_TRUE(w.wait_for("READY", 20)) << read_file(tmp / "w.err");
  // Channels were opened before the recorder existed: names must come from the
  // process registry.
  Proc rec(record_cmd(tmp / "trace", "-p " + std::to_string(w.pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  kill(w.pid, SIGUSR1);
  // The recorder stops once the process has ended, even while its parent (this
  // test) has not reaped it yet: a zombie, for which kill(pid, 0) still succeeds.
  siginfo_t si{};
  ASSERT_EQ(waitid(P_PID, id_t(w.pid), &si, WEXITED | WNOWAIT), 0) << "ended, left unreaped";
  EXPECT_EQ(kill(w.pid, 0), 0) << "a zombie: kill(pid, 0) still succeeds";
  EXPECT_EQ(rec.wait(60), 0) << "the recorder did not see its process end: " << read_file(tmp / "r.err");
  EXPECT_EQ(w.wait(), 0);
  TraceReader tr(tmp / "trace");
  check_exact_set(tr, Expect{2, 50000, 3});
}

// More channels than the registry's inline array (CP_REGISTRY_CAPACITY) holds: a
// late-attaching recorder reads the overflow chunks too and learns every name.
// First byte of the nop of the probe site `symbol` of the ELF file `elf` (where
// the uprobe goes) as process `pid` runs it (0x0f: the nop5, 0xcc: a uprobe's
// int3), or -1 when it is not mapped there.
int mapped_site_byte(pid_t pid, const std::string& elf, const char* symbol) {
  auto off = probe_site_file_offset(elf, symbol);
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (off && std::getline(maps, line)) {
    unsigned long start, end, moff;
    char perms[5];
    int path_at = 0;
    if (sscanf(line.c_str(), "%lx-%lx %4s %lx %*s %*s %n", &start, &end, perms, &moff, &path_at) < 4 || !path_at ||
        line.substr(size_t(path_at)) != elf || perms[2] != 'x' || *off < moff || *off >= moff + (end - start))
      continue;
    int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    uint8_t b = 0;
    bool ok = fd >= 0 && pread(fd, &b, 1, off_t(start + (*off - moff))) == 1;
    if (fd >= 0) close(fd);
    return ok ? b : -1;
  }
  return -1;
}

// Attach scope: `record -p` puts breakpoints into the recorded process only,
// not into another process that maps the same library (whose children would
// otherwise inherit the patched sites too).
TEST(Record, AttachToPidLeavesOtherProcessesUntouched) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string lib = std::filesystem::canonical(build_dir() / "libcptrace.so").string();
  Proc w(workload() + " --threads 1 --events 1000 --channels 1 --mode single --wait-signal", tmp / "w.out",
         tmp / "w.err");
  Proc other(workload() + " --threads 1 --events 1000 --channels 1 --mode single --wait-signal", tmp / "o.out",
             tmp / "o.err");
  ASSERT_TRUE(w.wait_for("READY", 20)) << read_file(tmp / "w.err");
  ASSERT_TRUE(other.wait_for("READY", 20)) << read_file(tmp / "o.err");
  Proc rec(record_cmd(tmp / "trace", "-p " + std::to_string(w.pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  EXPECT_EQ(mapped_site_byte(w.pid, lib, "cp_logTS_site"), 0xcc) << "the recorded process is not probed";
  EXPECT_EQ(mapped_site_byte(other.pid, lib, "cp_logTS_site"), 0x0f) << "another process was patched";
  EXPECT_EQ(mapped_site_byte(other.pid, lib, "cp_batch_submit"), 0x0f);
  kill(other.pid, SIGUSR1);
  EXPECT_EQ(other.wait(), 0);
  kill(w.pid, SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  check_exact_set(tr, Expect{1, 1000, 1});
}

TEST(Record, LateAttachLearnsTenThousandChannelNames) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc w(workload() + " --threads 2 --events 20000 --channels 10000 --mode single --wait-signal", tmp / "w.out",
         tmp / "w.err");
  ASSERT_TRUE(w.wait_for("READY", 60)) << read_file(tmp / "w.err");
  Proc rec(record_cmd(tmp / "trace", "-p " + std::to_string(w.pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  kill(w.pid, SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  EXPECT_GE(tr.channels().size(), 10000u);
  check_exact_set(tr, Expect{2, 20000, 10000});
  EXPECT_EQ(tr.meta()["channel_names_refused"], nlohmann::json::object()) << "the registry kept every name";
}

// A program that opens more names than the registry keeps (CP_REGISTRY_MAX_NAMES):
// it goes on unharmed, its registry stays bounded, and a recorder attached later
// learns the names kept, says how many were not, and records every event.
TEST(Record, LateAttachSaysWhichNamesTheRegistryRefused) {
  REQUIRE_BPF();
  TempDir tmp;
  const int channels = CP_REGISTRY_MAX_NAMES + 50;
  Proc w(workload() + " --threads 1 --events 40000 --channels " + std::to_string(channels) +
             " --mode single --wait-signal",
         tmp / "w.out", tmp / "w.err");
  ASSERT_TRUE(w.wait_for("READY", 60)) << read_file(tmp / "w.err");
  const pid_t pid = w.pid;
  Proc rec(record_cmd(tmp / "trace", "-p " + std::to_string(pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  kill(pid, SIGUSR1);
  EXPECT_EQ(w.wait(), 0) << read_file(tmp / "w.err");
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  EXPECT_EQ(tr.channels().size(), size_t{CP_REGISTRY_MAX_NAMES});
  EXPECT_EQ(tr.meta()["channel_names_refused"], nlohmann::json({{std::to_string(pid), 50}}));
  EXPECT_NE(read_file(tmp / "r.err").find("its channel registry refused 50 name(s)"), std::string::npos)
      << read_file(tmp / "r.err");
  EXPECT_EQ(tr.event_count() + tr.counters().total_dropped(), tr.counters().total_seen());
  EXPECT_EQ(tr.counters().total_seen(), 40000u + uint64_t(channels)) << "each event and each close, once";
}

TEST(Record, SigtermMidRunLeavesCompleteTrace) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc rec(record_cmd(tmp / "trace", "-- " + workload() + " --threads 2 --events 50000000 --channels 2 --mode single"),
           tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(rec.pid, SIGTERM);
  EXPECT_EQ(rec.wait(60), 128 + SIGTERM) << "exit status is the workload's (killed by the forwarded SIGTERM)\n"
                                         << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  EXPECT_FALSE(tr.error());
  EXPECT_TRUE(tr.meta().value("complete", false));
  EXPECT_GT(tr.event_count(), 1000u);
  // Flushed on the way out: everything the probes saw is in the file or counted.
  EXPECT_EQ(tr.event_count() + tr.counters().total_dropped(), tr.counters().total_seen());
}

// A few cp_logTS() events and then nothing: they must not wait in their CPU's
// stage (include/cptrace_records.h, CP_REC_SINGLES) until the recording stops.
// Every flush (0.5 s) empties the stage of each CPU into the trace.
void few_events_reach_the_trace(const std::string& env) {
  TempDir tmp;
  Proc rec(
      env + record_cmd(tmp / "trace", "-- " + workload() + " --threads 1 --events 5 --channels 1 --mode single --hold"),
      tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(rec.wait_for("LOGGED", 30)) << read_file(tmp / "r.err");
  pid_t wl = std::stoi(read_file(tmp / "r.out").substr(read_file(tmp / "r.out").find("LOGGED") + 7));
  uint64_t seen_live = live_user_events(tmp / "trace", 5);  // the program holds: nothing else will flush
  EXPECT_EQ(kill(wl, 0), 0) << "the program is still holding";
  EXPECT_EQ(seen_live, 5u) << "the 5 events reached the trace while the program ran";
  kill(wl, SIGUSR1);
  EXPECT_EQ(rec.wait(60), 0) << read_file(tmp / "r.err");
  TraceReader tr(tmp / "trace");
  EXPECT_TRUE(tr.meta().value("complete", false));
  uint64_t user = 0;
  tr.for_each_event([&](const TraceEvent& e) { user += e.kind == uint8_t(EventKind::User); });
  EXPECT_EQ(user, 5u) << "each event once";
  EXPECT_EQ(tr.event_count() + tr.counters().total_dropped(), tr.counters().total_seen());
}

TEST(Record, FewEventsReachTheTraceWhileTheProgramRuns) {
  REQUIRE_BPF();
  few_events_reach_the_trace("");
}

// The same through the probe site, whose events wait in the per-CPU stage
// (Linux 6.10+): the recorder's flush program (BPF_PROG_TEST_RUN on each CPU)
// is what hands them over while the program holds.
TEST(Record, FewSiteEventsLeaveTheirCpuStageWhileTheProgramRuns) {
  REQUIRE_BPF();
  few_events_reach_the_trace("env CPTRACE_SINGLE=site ");
}

// Buffered single events of threads that then idle, alive: the library's
// flusher hands them over, so they reach the trace while the threads idle,
// each named with its thread's tid, and once only when the threads end.
TEST(Record, BufferedSinglesReachTheTraceWhileTheirThreadsIdle) {
  REQUIRE_BPF();
  TempDir tmp;
  Proc rec(
      "env CPTRACE_SINGLE=buffer " +
          record_cmd(tmp / "trace", "-- " + workload() + " --threads 2 --events 5 --channels 1 --mode single --linger"),
      tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(rec.wait_for("LOGGED", 30)) << read_file(tmp / "r.err");
  pid_t wl = std::stoi(read_file(tmp / "r.out").substr(read_file(tmp / "r.out").find("LOGGED") + 7));
  uint64_t seen_live = live_user_events(tmp / "trace", 10);  // the threads idle: only the flusher hands over
  EXPECT_EQ(kill(wl, 0), 0) << "the program is still lingering";
  EXPECT_EQ(seen_live, 10u) << "the 10 events reached the trace while their threads idled";
  kill(wl, SIGUSR1);
  EXPECT_EQ(rec.wait(60), 0) << read_file(tmp / "r.err");
  std::string out = read_file(tmp / "r.out");
  auto report = nlohmann::json::parse(out.substr(out.find('{')));
  std::map<uint64_t, uint32_t> tid_of_thread;
  for (const auto& t : report["thread_list"]) tid_of_thread[t["thread"].get<uint64_t>()] = t["tid"].get<uint32_t>();
  TraceReader tr(tmp / "trace");
  EXPECT_TRUE(tr.meta().value("complete", false));
  std::set<uint64_t> tuples;
  uint64_t user = 0, wrong_tid = 0;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    user++;
    tuples.insert(e.tuple);
    wrong_tid += e.tid != tid_of_thread[e.tuple / kThreadStride];
  });
  EXPECT_EQ(user, 10u) << "each event once";
  EXPECT_EQ(tuples.size(), 10u);
  EXPECT_EQ(wrong_tid, 0u) << "an event named with the flusher's tid, not its thread's";
  EXPECT_EQ(tr.event_count() + tr.counters().total_dropped(), tr.counters().total_seen());
}

TEST(Record, SigkillLeavesTraceReadableUpToLastFrame) {
  REQUIRE_BPF();
  TempDir tmp;
  // --hold: the program stays alive once it has logged, so the recorder is still
  // recording when it is killed (on a fast path the 50 M events took under 2 s,
  // and the recorder then stopped of itself and wrote a complete trace).
  Proc wl(workload() + " --threads 1 --events 50000000 --channels 2 --mode single --wait-signal --hold", tmp / "w.out",
          tmp / "w.err");
  ASSERT_TRUE(wl.wait_for("READY", 20));
  Proc rec(record_cmd(tmp / "trace", "-p " + std::to_string(wl.pid)), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  kill(wl.pid, SIGUSR1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  kill(rec.pid, SIGKILL);
  rec.wait();
  TraceReader tr(tmp / "trace");
  EXPECT_FALSE(tr.meta().value("complete", false)) << "meta.json says complete after a SIGKILL";
  // Readable: everything up to the last complete frame decodes, names resolve.
  // The tuples are the user events' (a close, were one recorded, would carry
  // tuple 0 stamped after all the others).
  uint64_t n = 0, named = 0, backwards = 0, user = 0;
  std::map<uint64_t, uint64_t> ts_of_tuple;
  tr.for_each_event([&](const TraceEvent& e) {
    n++;
    named += tr.channel_name(e.channel).rfind("chan", 0) == 0;
    if (e.kind != uint8_t(EventKind::User)) return;
    user++;
    ts_of_tuple[e.tuple] = e.ts;
  });
  uint64_t prev = 0;
  for (auto& [tuple, ts] : ts_of_tuple) {  // one thread: emission order == tuple order
    backwards += ts < prev;
    prev = ts;
  }
  EXPECT_GT(user, 10000u);
  EXPECT_LE(n - user, 2u) << "other than user events: at most the two channels' close";
  EXPECT_EQ(ts_of_tuple.size(), user) << "duplicate tuples";
  EXPECT_EQ(named, n);
  EXPECT_EQ(backwards, 0u);
  if (tr.error()) {
    EXPECT_GE(tr.error()->offset(), 16u);
  }
}

TEST(RecordErrors, ClearMessagesAndNonZeroExit) {
  TempDir tmp;
  auto r = run(cptrace_bin() + " dump " + (tmp / "nonexistent"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nonexistent"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --ring-mb 3 --lib /bin/true", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("ring-mb"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --lib /bin/true", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/bin/true"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " record -o " + (tmp / "t") + " -p 999999999", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("999999999"), std::string::npos) << r.err;
}

namespace {

// A small tmpfs mounted in a temporary directory for the test's lifetime.
struct SmallDisk {
  fs::path dir;
  bool mounted = false;
  SmallDisk(const TempDir& tmp, const char* size) : dir(tmp.path / "disk") {
    fs::create_directory(dir);
    std::string opts = std::string("size=") + size;
    mounted = mount("cptrace-test", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted) umount2(dir.c_str(), MNT_DETACH);
  }
};

}  // namespace

// The disk fills up mid-recording: the recorder stops writing and says why at
// once, keeps counting what it can no longer write as dropped until the command
// ends on its own, and exits non-zero; the trace reads up to its last frame and
// every event the command emitted is either recorded or counted.
TEST(Record, DiskFullStopsCleanlyAndCountsTheRest) {
  REQUIRE_BPF();
  TempDir tmp;
  SmallDisk disk(tmp, "1m");
  if (!disk.mounted) GTEST_SKIP() << "SKIPPED: cannot mount a tmpfs: " << strerror(errno);
  std::string trace = (disk.dir / "trace").string();
  // 4M events compressed to 1.27-1.54 MB here (staged and unstaged singles; it
  // depends on the stamps' regularity), and once all fitted in the 1 MiB: 10M
  // need 3x the disk at least. (A smaller disk leaves no room for meta.json's
  // last write, which the test reads.)
  constexpr uint64_t kThreads = 2, kEvents = 5000000, kChannels = 3;
  auto r =
      run(record_cmd(trace) + " -- " + workload() + " --threads 2 --events 5000000 --channels 3 --mode single", tmp);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device (ENOSPC)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(trace + "/events.cpt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("counted as dropped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the command exited with status 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  // The workload ran to its end (its last line says what it emitted).
  std::string out = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  auto emitted = nlohmann::json::parse(out.substr(out.rfind('\n') + 1));
  EXPECT_EQ(emitted["total"].get<uint64_t>(), kThreads * kEvents);

  TraceReader tr(trace);
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  EXPECT_TRUE(tr.meta().contains("write_error")) << tr.meta_problem();
  auto [user, closes] = count_recorded(tr);
  const Counters& c = tr.counters();
  EXPECT_GT(user, 0u);
  EXPECT_GT(c.total_dropped(), 0u) << "nothing was counted as not written";
  // Recorded + dropped == seen == emitted, exactly: the probes stay attached
  // after the failure, so nothing the command emitted goes uncounted (its
  // channel closes are events too: main closes each channel once at the end).
  EXPECT_EQ(user + closes + c.total_dropped() + c.total_filtered(), c.total_seen());
  EXPECT_EQ(c.total_seen(), kThreads * kEvents + kChannels);
  EXPECT_EQ(tr.meta().value("recorded_events", uint64_t(0)), user + closes);

  auto info = run(cptrace_bin() + " info " + trace, tmp);
  EXPECT_EQ(info.status, 0) << info.out << info.err;
  EXPECT_EQ(info.out.find("MISMATCH"), std::string::npos) << info.out;
  auto dump = run("(" + cptrace_bin() + " dump " + trace + "; echo status=$?) | tail -n 2", tmp);
  EXPECT_NE(dump.out.find("status=0"), std::string::npos) << dump.out << dump.err;
}

// No room even for meta.json at start: a setup error naming the file and the
// cause, exit 1, and the held command never runs.
TEST(Record, FullDiskAtStartIsAClearError) {
  REQUIRE_BPF();
  TempDir tmp;
  SmallDisk disk(tmp, "256k");
  if (!disk.mounted) GTEST_SKIP() << "SKIPPED: cannot mount a tmpfs: " << strerror(errno);
  run("dd if=/dev/zero of=" + (disk.dir / "fill").string() + " bs=4k", tmp);  // until ENOSPC
  std::string trace = (disk.dir / "trace").string();
  auto r = run(record_cmd(trace) + " -- " + workload() + " --threads 1 --events 10 --channels 1", tmp);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(trace + "/meta.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("\"total\""), std::string::npos) << "the command ran: " << r.out;
}

namespace {

// CLOCK_REALTIME - CLOCK_MONOTONIC, read between two monotonic reads; width: the
// time between those two reads (how uncertain the difference is).
struct RtOffset {
  int64_t offset, width;
};
RtOffset realtime_minus_mono() {
  auto now = [](clockid_t c) {
    timespec t;
    clock_gettime(c, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  int64_t m1 = now(CLOCK_MONOTONIC), rt = now(CLOCK_REALTIME), m2 = now(CLOCK_MONOTONIC);
  return {rt - m1, m2 - m1};
}

}  // namespace

// meta.json "start"/"stop": realtime_ns is the wall-clock time of the same
// instant as mono_ns (and tsc), not of a later read: so realtime_ns - mono_ns is
// the realtime-monotonic offset, which the test reads itself before and after.
TEST(Record, StartAndStopRealtimeAreTheInstantOfTheirMonoNs) {
  REQUIRE_BPF();
  TempDir tmp;
  RtOffset before = realtime_minus_mono();
  auto r = run(record_cmd(tmp / "trace", "--lib " + (build_dir() / "libcptrace.so").string() + " -- sleep 0.2"), tmp);
  RtOffset after = realtime_minus_mono();
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "trace");
  // The offset only moves by NTP slewing (or a step) between our two reads; the
  // reads themselves are uncertain by their widths. 1 ms on top is slack for
  // nothing the test can measure (the recorder's own bracket is microseconds).
  int64_t drift = std::llabs(after.offset - before.offset);
  int64_t tol = drift + before.width + after.width + 1000000;
  for (const char* at : {"start", "stop"}) {
    const auto& m = tr.meta()[at];
    int64_t off = int64_t(m["realtime_ns"].get<uint64_t>()) - int64_t(m["mono_ns"].get<uint64_t>());
    EXPECT_LE(std::llabs(off - before.offset), tol)
        << at << ": realtime_ns - mono_ns = " << off << ", the clocks' offset " << before.offset;
  }
}

// `record -- CMD` of a program that does not use libcptrace attaches to the
// libcptrace.so beside cptrace (the command could dlopen it) and records
// nothing, and says so once.
TEST(Record, CommandWithoutProbeSitesRecordsNothing) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "trace", "-- sleep 0.2"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string said = "no probe site fired in sleep or its children";
  ASSERT_NE(r.err.find(said), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said, r.err.find(said) + 1), std::string::npos) << r.err;
  TraceReader tr(tmp / "trace");
  EXPECT_TRUE(tr.meta().value("complete", false));
  EXPECT_EQ(tr.event_count(), 0u);
  auto targets = tr.meta()["targets"];
  ASSERT_EQ(targets.size(), 1u) << targets.dump();
  EXPECT_EQ(targets[0].get<std::string>(), fs::canonical(build_dir() / "libcptrace.so").string());
}

// --net rings are sized for what the network path produces (16 MiB per CPU),
// not the 64 MiB the user event rings take by default; --ring-mb sets both.
TEST(Record, NetRingsSizedForTheNetworkPathUnlessRingMbGiven) {
  REQUIRE_BPF();
  for (auto [flag, net_mb, user_mb] : {std::tuple{"", 16u, default_ring_mb()}, std::tuple{"--ring-mb 8 ", 8u, 8u}}) {
    TempDir tmp;
    auto r = run(record_cmd(tmp / "trace", std::string(flag) + "--net -- sleep 0.1"), tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    TraceReader tr(tmp / "trace");
    const auto& c = tr.meta()["collector"];
    EXPECT_EQ(c.value("net_ring_bytes", uint64_t(0)), uint64_t(net_mb) << 20) << flag << c.dump();
    EXPECT_EQ(c["drain"].value("ring_bytes", uint64_t(0)), uint64_t(user_mb) << 20) << flag << c.dump();
  }
}

namespace {

struct Bracket {
  uint64_t t0 = 0, t1 = 0;
};

// The workload `bracket`'s OUT file: tuple -> bracket, and the close's.
std::map<uint64_t, Bracket> read_brackets(const fs::path& file, Bracket& close) {
  std::map<uint64_t, Bracket> m;
  std::ifstream in(file);
  std::string first;
  Bracket b;
  while (in >> first >> b.t0 >> b.t1) {
    if (first == "close")
      close = b;
    else
      m[std::stoull(first)] = b;
  }
  return m;
}

// Every cp_logTS event carries the TSC its probe site read at the call
// (lib/probe_site.h), so it lies inside the caller's own lfence-ordered rdtsc
// bracket: every one, and the channel close too. With the test-only simulated
// clock (`sim_spec`), that stamp is transformed exactly like a batch stamp, and
// the transform is monotone: inside the transformed bracket.
void expect_stamps_in_brackets(const std::string& sim_spec) {
  TempDir tmp;
  const int threads = 2, events = 20000;
  std::string extra = sim_spec.empty() ? "" : "--simulate-clock " + sim_spec + " ";
  // The site's stamp (the buffer's: StampCpu.*).
  auto r = run(
      record_cmd(tmp / "trace", extra + "-- env CPTRACE_SINGLE=site " + (build_dir() / "tests" / "bracket").string() +
                                    " " + (tmp / "brackets") + " --threads " + std::to_string(threads) + " --events " +
                                    std::to_string(events)),
      tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  Bracket close;
  auto brackets = read_brackets(tmp / "brackets", close);
  ASSERT_EQ(brackets.size(), size_t(threads * events));
  TraceReader tr(tmp / "trace");
  ASSERT_FALSE(tr.error());
  ClockTransform sim = ClockTransform::from_json(tr.meta().value("simulated_clock", nlohmann::json()));
  ASSERT_EQ(sim.enabled, !sim_spec.empty());
  auto image = [&](uint64_t t) { return sim.enabled ? sim.apply(t) : t; };
  uint64_t user = 0, outside = 0, closes = 0, not_tsc = 0;
  std::string first_miss;
  tr.for_each_event([&](const TraceEvent& e) {
    not_tsc += !is_tsc(e.timebase);
    Bracket b;
    if (e.kind == uint8_t(EventKind::ChannelClose)) {
      closes++;
      b = close;
    } else {
      user++;
      auto it = brackets.find(e.tuple);
      if (it == brackets.end()) {
        outside++;
        return;
      }
      b = it->second;
    }
    if (e.ts < image(b.t0) || e.ts > image(b.t1)) {
      if (outside++ == 0)
        first_miss = fmt::format("tuple {}: stamp {} outside [{}, {}] ({:+} / {:+} ticks)", e.tuple, e.ts, image(b.t0),
                                 image(b.t1), int64_t(e.ts - image(b.t0)), int64_t(e.ts - image(b.t1)));
    }
  });
  EXPECT_EQ(user, uint64_t(threads * events));
  EXPECT_EQ(closes, 1u);
  EXPECT_EQ(not_tsc, 0u) << "single events and closes are TSC-stamped at the call";
  EXPECT_EQ(outside, 0u) << first_miss;
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
}

}  // namespace

TEST(Record, SingleEventsStampedInsideTheirCallBracket) {
  REQUIRE_BPF();
  expect_stamps_in_brackets("");
}

TEST(Record, SimulatedClockTransformsSingleStampsLikeBatchOnes) {
  REQUIRE_BPF();
  expect_stamps_in_brackets("5000000000,250");
}

// A library whose cp_logTS is the old bare `nop5; ret` (built before the
// stamp) would give events no call-time TSC: refused, naming file and symbol.
TEST(RecordErrors, SiteWithoutTheTscStampIsRefused) {
  REQUIRE_BPF();
  TempDir tmp;
  std::ofstream(tmp / "old.S") << R"(.text
.p2align 4
.globl cp_logTS, cp_batch_submit, cp_channel_announce, cp_channel_closed
.type cp_logTS,@function
cp_logTS:
cp_batch_submit:
cp_channel_announce:
cp_channel_closed:
.byte 0x0f,0x1f,0x44,0x00,0x00
ret
.size cp_logTS,.-cp_logTS
.section .note.GNU-stack,"",@progbits
)";
  std::string so = tmp / "libold.so";
  ASSERT_EQ(run("cc -shared -fPIC -o " + so + " " + (tmp / "old.S"), tmp).status, 0);
  auto r = run(record_cmd(tmp / "trace", "--lib " + so + " -- sleep 0.1"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(so), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not a cptrace probe site of this version"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("built before the stamp"), std::string::npos) << r.err;
}
