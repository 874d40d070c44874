// Recording, from the host, programs that run in containers: their own mount
// and pid (and network) namespaces, made here with unshare as a runtime makes
// them. The library lives at a path that exists only inside the container;
// events carry the host pid, and the trace gives each process's pid inside
// its container too (trace/pid_table.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cptrace_net.h"
#include "record/namespace_pids.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;
namespace fs = std::filesystem;

namespace {

// A container with its own root, as Docker or containerd start one: a tmpfs
// holding the host's /usr, /etc and /dev, an empty /run and /tmp of its own,
// and /app, which exists only in there: with `copy`, a copy of libcptrace.so
// and the workloads (so the library is another file than any of the host's);
// with `bind`, the build directory bind-mounted. Then chroot, /proc of the new
// pid namespace, and the command as a child of the container's first process.
// Run under `unshare --mount --pid --fork`.
constexpr const char* kOwnRootScript = R"SH(set -e
R=$1 B=$2 MODE=$3
shift 3
mount -t tmpfs -o mode=0755 cptrace-ctr "$R"
mkdir "$R/usr" "$R/etc" "$R/dev" "$R/sys" "$R/proc" "$R/tmp" "$R/run" "$R/app"
for d in usr etc dev sys; do mount --rbind "/$d" "$R/$d"; done
for l in bin sbin lib lib64; do if [ -L "/$l" ]; then ln -s "$(readlink "/$l")" "$R/$l"; fi; done
if [ "$MODE" = copy ]; then
  cp "$B/libcptrace.so" "$B/tests/workload" "$B/tests/spawner" "$R/app/"
  if [ -f "$B/cptrace.jar" ]; then cp "$B/cptrace.jar" "$B/libcptrace_jni.so" "$B/tests/java/JniWorkload.class" "$R/app/"; fi
else
  mount --bind "$B" "$R/app"
fi
exec chroot "$R" /bin/sh -c 'mount -t proc proc /proc; "$@"; exit $?' sh "$@"
)SH";

// A container that keeps the host's root and /run (unshare --mount --pid --fork
// --mount-proc): a private tmpfs over DIR with the build directory bound at
// DIR/app, so DIR/app/... exists only inside. Its first process (pid 1) execs
// the command.
constexpr const char* kSharedRootScript = R"SH(set -e
D=$1 B=$2
shift 2
mount -t tmpfs -o mode=0755 cptrace-ctr "$D"
mkdir "$D/app"
mount --bind "$B" "$D/app"
[ "$NET" = 1 ] && ip link set lo up
readlink /proc/self/ns/net > "$D.netns"
# The first process of a new pid namespace cannot name its parent's follow mark
# (its parent is outside: getppid() is 0), so it does not wait for the recorder
# (docs/containers.md#limits); a runtime's setup usually outlasts the attach.
# Here the setup is a few ms: wait for our own mark, as the library would.
MARK=/run/cptrace/follow/$(stat -L -c %i /proc/self/ns/pid).$$
i=0; while [ ! -e "$MARK" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
exec "$@"
)SH";

std::string write_script(const TempDir& tmp, const std::string& name, const char* text) {
  std::string path = tmp / name;
  std::ofstream(path) << text;
  return path;
}

// The process named `comm` among the descendants of `root` (0 if none).
pid_t find_descendant(pid_t root, const std::string& comm) {
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    std::string c = read_file("/proc/" + std::to_string(p) + "/comm");
    if (p != root && c == comm + "\n") return p;
    std::istringstream kids(read_file("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children"));
    for (pid_t k; kids >> k;) todo.push_back(k);
  }
  return 0;
}

pid_t wait_for_descendant(pid_t root, const std::string& comm, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pid_t p = find_descendant(root, comm)) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

uint64_t pid_namespace_of(pid_t pid) {
  struct stat st {};
  return stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &st) == 0 ? st.st_ino : 0;
}

// The last JSON line the workload printed (what it emitted).
nlohmann::json emitted(const std::string& out) {
  auto at = out.rfind("{\"pid\"");
  return at == std::string::npos ? nlohmann::json() : nlohmann::json::parse(out.substr(at));
}

struct Recorded {
  uint64_t user = 0;  // user events
  std::map<uint32_t, uint64_t> per_pid;  // user events per host pid
};

Recorded user_events(const TraceReader& tr) {
  Recorded r;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    r.user++;
    r.per_pid[e.pid]++;
  });
  return r;
}

// Every user event emitted is recorded, nothing dropped or filtered, and
// recorded + dropped + filtered == seen == emitted (user events and the
// `closes` channel closes, which the probes count too).
void expect_exact(const TraceReader& tr, uint64_t emitted_total, uint64_t closes) {
  const Counters& c = tr.counters();
  uint64_t recorded = tr.event_count();
  EXPECT_EQ(user_events(tr).user, emitted_total);
  EXPECT_EQ(recorded, emitted_total + closes);
  EXPECT_EQ(c.total_dropped(), 0u);
  EXPECT_EQ(recorded + c.total_dropped() + c.total_filtered(), c.total_seen());
  EXPECT_EQ(c.total_seen(), emitted_total + closes);
}

// A workload in an own-root container, stopped at READY: the host pid and
// the pid it printed (its own, inside).
struct ContainedWorkload {
  std::unique_ptr<Proc> ctr;
  pid_t host = 0;
  uint32_t nspid = 0;
};

ContainedWorkload start_contained_workload(const TempDir& tmp, const std::string& args) {
  ContainedWorkload w;
  fs::create_directories(tmp.path / "root");
  std::string script = write_script(tmp, "own-root.sh", kOwnRootScript);
  w.ctr = std::make_unique<Proc>("unshare --mount --pid --fork sh " + script + " " + (tmp / "root") + " " +
                                     build_dir().string() + " copy env LD_LIBRARY_PATH=/app /app/workload " + args,
                                 tmp / "ctr.out", tmp / "ctr.err");
  EXPECT_TRUE(w.ctr->wait_for("READY", 30)) << read_file(tmp / "ctr.err");
  std::string out = read_file(tmp / "ctr.out");
  w.nspid = uint32_t(std::stoul(out.substr(out.find("READY ") + 6)));
  w.host = wait_for_descendant(w.ctr->pid, "workload", 10);
  return w;
}

}  // namespace

// The reported bug: `record -p PID` of a process whose libcptrace.so exists
// only in its mount namespace (/app) stopped with "cannot make canonical
// path" (canonicalising /proc/PID/root/... leaves the namespace). Now it
// attaches through /proc/PID/root, records every event exactly, and gives the
// process's pid both ways.
// A process in a time namespace (`unshare --time --monotonic 1000`): the
// recorder reads its CLOCK_MONOTONIC offset from /proc, so that the
// System.nanoTime() stamps it hands over convert onto the host's clock.
TEST(Containers, TimeNamespaceOffsetIsRead) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root to unshare a time namespace";
  testutil::TempDir tmp;
  testutil::Proc p("unshare --time --monotonic 1000 --fork sleep 30", tmp / "out", tmp / "err");
  std::optional<PidEntry> e;
  for (int i = 0; i < 200 && !(e && e->mono_offset_ns); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream kids("/proc/" + std::to_string(p.pid) + "/task/" + std::to_string(p.pid) + "/children");
    uint32_t child = 0;
    if (kids >> child) e = read_namespace_pid(child);
  }
  ASSERT_TRUE(e) << testutil::read_file(tmp / "err");
  EXPECT_EQ(e->mono_offset_ns, 1000'000'000'000) << testutil::read_file(tmp / "err");
  EXPECT_FALSE(e->mono_offset_unknown);
  std::optional<PidEntry> host = read_namespace_pid(uint32_t(getpid()));
  ASSERT_TRUE(host);
  EXPECT_EQ(host->mono_offset_ns, 0);
}

TEST(Containers, RecordPidOfProcessInOwnMountAndPidNamespaces) {
  REQUIRE_BPF();
  TempDir tmp;
  ContainedWorkload w = start_contained_workload(tmp, "--wait-signal --threads 2 --events 3000 --channels 2");
  ASSERT_GT(w.host, 0) << "no workload process under the container";
  ASSERT_NE(uint32_t(w.host), w.nspid);
  ASSERT_NE(pid_namespace_of(w.host), pid_namespace_of(getpid()));
  ASSERT_FALSE(fs::exists("/app/libcptrace.so")) << "the test needs /app to exist only in the container";

  Proc rec(record_cmd(tmp / "t") + " -p " + std::to_string(w.host), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec));
  kill(w.host, SIGUSR1);
  ASSERT_EQ(w.ctr->wait(60), 0) << read_file(tmp / "ctr.err");
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");

  nlohmann::json e = emitted(read_file(tmp / "ctr.out"));
  ASSERT_TRUE(e.is_object()) << read_file(tmp / "ctr.out");
  EXPECT_EQ(e.value("pid", 0u), w.nspid) << "the workload knows itself by its container pid";
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  expect_exact(tr, e.value("total", 0ull), 2);
  Recorded r = user_events(tr);
  ASSERT_EQ(r.per_pid.size(), 1u);
  EXPECT_EQ(r.per_pid.begin()->first, uint32_t(w.host)) << "events carry the host pid";
  EXPECT_EQ(tr.pids().container_pid(w.host), std::optional<uint32_t>(w.nspid));
  EXPECT_EQ(tr.channel_name(e["channels"][0].value("id", 0ull)), "chan0") << "names from the container's registry";
  // The host cannot name the container's file by a path of its own: it is
  // reached through the process (/proc/PID/root/..., or /proc/PID/map_files/...
  // under a chroot, whose path the host's /proc/PID/maps shows from the
  // container's mount namespace).
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  ASSERT_EQ(meta["targets"].size(), 1u);
  EXPECT_EQ(meta["targets"][0].get<std::string>().rfind("/proc/" + std::to_string(w.host) + "/", 0), 0u)
      << meta["targets"];

  std::string both = "pid=" + std::to_string(w.host) + " nspid=" + std::to_string(w.nspid);
  auto dump = run(cptrace_bin() + " dump " + (tmp / "t"), tmp);
  ASSERT_EQ(dump.status, 0) << dump.err;
  size_t lines = 0;
  std::istringstream text(dump.out);
  for (std::string line; std::getline(text, line);)
    if (line.find(" user ") != std::string::npos) lines += line.find(both + " ") != std::string::npos;
  EXPECT_EQ(lines, e.value("total", 0ull)) << dump.out.substr(0, 2000);
  auto csv = run(cptrace_bin() + " dump --csv " + (tmp / "t"), tmp);
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')), "node,kind,ts,channel,tuple,pid,tid,cpu,nspid");
  EXPECT_NE(csv.out.find("," + std::to_string(w.host) + ",", 0), std::string::npos);
  auto info = run(cptrace_bin() + " info " + (tmp / "t"), tmp);
  EXPECT_NE(info.out.find("process    " + both), std::string::npos) << info.out;
  auto exported = run(cptrace_bin() + " export csv " + (tmp / "t") + " -o " + (tmp / "e.csv") + " && " + cptrace_bin() +
                          " export json " + (tmp / "t") + " -o " + (tmp / "e.json"),
                      tmp);
  ASSERT_EQ(exported.status, 0) << exported.err;
  std::string ecsv = read_file(tmp / "e.csv");
  EXPECT_EQ(ecsv.substr(0, ecsv.find('\n')), "node,kind,ts,time_ns,channel,channel_id,tuple,pid,tid,cpu,nspid");
  EXPECT_NE(ecsv.find("," + std::to_string(w.host) + ","), std::string::npos);
  auto ej = nlohmann::json::parse(read_file(tmp / "e.json"));
  size_t labelled = 0;
  for (const auto& ev : ej["traceEvents"])
    if (ev.value("ph", "") == "M" && ev.value("pid", 0) == w.host)
      labelled += ev["args"].value("labels", "") == "nspid " + std::to_string(w.nspid);
  EXPECT_EQ(labelled, 1u);
}

// A JVM in an own-root container (the jar and libcptrace_jni.so only in its
// /app), recorded late from the host with -p: every event of its Java threads,
// under the JVM's host pid, and its pid inside.
TEST(Containers, JvmInContainerRecordedFromHost) {
  REQUIRE_BPF();
  ASSERT_TRUE(fs::exists(build_dir() / "cptrace.jar") && fs::exists(build_dir() / "tests/java/JniWorkload.class"))
      << "the Java parts were not built (no JDK at build time?)";
  TempDir tmp;
  fs::create_directories(tmp.path / "root");
  std::string script = write_script(tmp, "own-root.sh", kOwnRootScript);
  constexpr uint64_t kEvents = 20000, kThreads = 3;
  Proc ctr("unshare --mount --pid --fork sh " + script + " " + (tmp / "root") + " " + build_dir().string() +
               " copy java -Xshare:auto -cp /app/cptrace.jar:/app JniWorkload --threads " + std::to_string(kThreads) +
               " --events " + std::to_string(kEvents) + " --channels 2 --mode single --wait-file /tmp/go",
           tmp / "ctr.out", tmp / "ctr.err");
  ASSERT_TRUE(ctr.wait_for("READY", 120)) << read_file(tmp / "ctr.err");
  pid_t jvm = find_descendant(ctr.pid, "java");
  ASSERT_GT(jvm, 0);
  std::string out = read_file(tmp / "ctr.out");
  uint32_t nspid = uint32_t(std::stoul(out.substr(out.find("READY ") + 6)));
  ASSERT_NE(uint32_t(jvm), nspid);
  Proc rec(record_cmd(tmp / "t", "--ring-mb 64") + " -p " + std::to_string(jvm), tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec));
  // The container's /tmp, reached from the host through the JVM's root.
  std::ofstream("/proc/" + std::to_string(jvm) + "/root/tmp/go").put('\n');
  ASSERT_EQ(ctr.wait(120), 0) << read_file(tmp / "ctr.err");
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  Recorded r = user_events(tr);
  EXPECT_EQ(r.user, kThreads * kEvents);
  const Counters& c = tr.counters();
  EXPECT_EQ(c.total_dropped(), 0u);
  EXPECT_EQ(r.user + c.total_dropped() + c.total_filtered() + 2 /* closes */, c.total_seen());
  ASSERT_EQ(r.per_pid.size(), 1u);
  EXPECT_EQ(r.per_pid.begin()->first, uint32_t(jvm));
  EXPECT_EQ(tr.pids().container_pid(jvm), std::optional<uint32_t>(nspid));
  std::set<std::string> names;
  tr.for_each_event([&](const TraceEvent& e) { names.insert(tr.channel_name(e.channel)); });
  EXPECT_EQ(names, (std::set<std::string>{"java.chan0", "java.chan1"}));
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  ASSERT_EQ(meta["targets"].size(), 1u);
  EXPECT_EQ(meta["targets"][0].get<std::string>().rfind("/proc/" + std::to_string(jvm) + "/", 0), 0u)
      << meta["targets"];
}

// --lib through /proc/PID/root: the container's own copy of the library (a file
// the host does not have at any path), every process mapping it.
TEST(Containers, RecordLibThroughProcRoot) {
  REQUIRE_BPF();
  TempDir tmp;
  ContainedWorkload w = start_contained_workload(tmp, "--wait-signal --hold --threads 2 --events 2000 --mode batch");
  ASSERT_GT(w.host, 0);
  std::string lib = "/proc/" + std::to_string(w.host) + "/root/app/libcptrace.so";
  Proc rec(record_cmd(tmp / "t") + " --lib " + lib, tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(attached(rec));
  kill(w.host, SIGUSR1);
  ASSERT_TRUE(w.ctr->wait_for("LOGGED", 30)) << read_file(tmp / "ctr.err");
  // Alive past one flush period, so the recorder meets the process and reads its pids.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  kill(w.host, SIGUSR1);
  ASSERT_EQ(w.ctr->wait(60), 0) << read_file(tmp / "ctr.err");
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");

  nlohmann::json e = emitted(read_file(tmp / "ctr.out"));
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  expect_exact(tr, e.value("total", 0ull), 2);
  Recorded r = user_events(tr);
  ASSERT_EQ(r.per_pid.size(), 1u);
  EXPECT_EQ(r.per_pid.begin()->first, uint32_t(w.host));
  EXPECT_EQ(tr.pids().container_pid(w.host), std::optional<uint32_t>(w.nspid));
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  EXPECT_EQ(meta["targets"], nlohmann::json::array({lib}));
}

// A --lib naming a path that exists only in a container, without /proc/PID/root:
// a clear error naming the flag and the path, nothing recorded.
TEST(Containers, LibPathOnlyInsideIsNamedInTheError) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t") + " --lib /app/libcptrace.so", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--lib /app/libcptrace.so"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "t"));
}

// Files in /run/cptrace/follow whose recorder is gone: what a recorder that ended
// left behind. Every file holds its recorder's pid (a mark, and the lock
// `recorder.PID`). Another recording on this machine (a second test run) keeps its
// own files while it runs: those are not this test's to judge.
static std::vector<std::string> follow_files_of_ended_recorders() {
  std::vector<std::string> left;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/cptrace/follow", ec)) {
    std::ifstream f(e.path());
    pid_t pid = 0;
    if (!(f >> pid) || pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) left.push_back(e.path().filename());
  }
  return left;
}

// `record -- CMD` where CMD makes the container (unshare) and runs a program
// whose library exists inside only: the tree is followed into the new pid
// namespace, every process started in there (fork+exec, posix_spawn,
// vfork+exec) waits for the recorder and is recorded from its first event,
// each with its host pid and its pid inside.
TEST(Containers, CommandEnteringContainerIsFollowed) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string script = write_script(tmp, "shared-root.sh", kSharedRootScript);
  fs::create_directories(tmp.path / "c");
  std::string spawner = (tmp / "c") + "/app/tests/spawner";
  auto r = run(record_cmd(tmp / "t") + " -- unshare --mount --pid --fork --mount-proc sh " + script + " " +
                   (tmp / "c") + " " + build_dir().string() + " " + spawner + " --children 3 --events 20",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_FALSE(fs::exists(spawner)) << "the container's path must not exist outside it";
  nlohmann::json s = emitted(r.out);
  EXPECT_EQ(s.value("pid", 0u), 1u) << "the spawner is the container's first process";
  EXPECT_EQ(s.value("started", 0u), 9u);

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  expect_exact(tr, 40 + 9 * 20, 0);
  std::map<std::string, std::map<uint32_t, uint64_t>> per;  // channel -> host pid -> events
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User)) per[tr.channel_name(e.channel)][e.pid]++;
  });
  ASSERT_EQ(per["spawner"].size(), 1u);
  uint32_t root = per["spawner"].begin()->first;
  EXPECT_EQ(per["spawner"][root], 40u);
  EXPECT_EQ(tr.pids().container_pid(root), std::optional<uint32_t>(1u));
  ASSERT_EQ(per["spawned"].size(), 9u);
  std::set<uint32_t> nspids;
  for (const auto& [pid, n] : per["spawned"]) {
    EXPECT_EQ(n, 20u) << "pid " << pid;
    auto ns = tr.pids().container_pid(pid);
    ASSERT_TRUE(ns) << "no container pid for " << pid;
    EXPECT_NE(*ns, pid);
    nspids.insert(*ns);
  }
  EXPECT_EQ(nspids.size(), 9u);
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  // The script's own short commands (mount, mkdir) do not wait for the recorder
  // (no libcptrace) and may end before it attached: only a lower bound here.
  EXPECT_GE(meta["follow"].value("processes", 0u), 10u) << meta["follow"].dump();
  EXPECT_EQ(follow_files_of_ended_recorders(), std::vector<std::string>{})
      << "follow marks or the recorder's lock left behind";
}

// --net of a command in its own network namespace: the tree's traffic, all of
// it in the container's namespace (its loopback), under host pid and container
// pid; `--netns /proc/PID/ns/net` names that namespace from the host.
TEST(Containers, NetworkCaptureInsideTheContainersNamespace) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string script = write_script(tmp, "shared-root.sh", kSharedRootScript);
  fs::create_directories(tmp.path / "c");
  const int port = 48000 + getpid() % 1000;
  auto r = run("NET=1 " + record_cmd(tmp / "t", "--net") + " -- unshare --mount --pid --net --fork --mount-proc sh " +
                   script + " " + (tmp / "c") + " " + build_dir().string() + " " + (tmp / "c") +
                   "/app/tests/spawner --children 1 --events 5 --udp " + std::to_string(port),
               tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  std::string ns_text = read_file((tmp / "c") + ".netns");  // net:[INODE]
  ASSERT_EQ(ns_text.rfind("net:[", 0), 0u) << ns_text;
  uint32_t netns = uint32_t(std::stoul(ns_text.substr(5)));
  struct stat own {};
  ASSERT_EQ(stat("/proc/self/ns/net", &own), 0);
  ASSERT_NE(netns, uint32_t(own.st_ino));

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::map<uint32_t, uint64_t> sends;  // bytes per host pid
  uint64_t events = 0, elsewhere = 0;
  tr.for_each_net_event([&](const NetEvent& e) {
    events++;
    if (e.r.netns != netns) elsewhere++;
    if (e.r.kind == CP_NET_SOCK_SEND) sends[e.r.pid] += e.r.len;
  });
  EXPECT_GT(events, 0u);
  EXPECT_EQ(elsewhere, 0u) << "traffic of the recorded tree outside the container's namespace";
  ASSERT_EQ(sends.size(), 4u) << "the spawner and its 3 programs";
  for (const auto& [pid, bytes] : sends) {
    EXPECT_EQ(bytes, 300u) << "pid " << pid;
    EXPECT_TRUE(tr.pids().container_pid(pid)) << "pid " << pid;
  }
  const Counters& nc = tr.net_counters();
  EXPECT_EQ(tr.net_event_count() + nc.total_dropped(), nc.total_seen());
  EXPECT_EQ(nc.total_dropped(), 0u);
  auto dump = run(cptrace_bin() + " dump " + (tmp / "t"), tmp);
  EXPECT_NE(dump.out.find("netns=" + std::to_string(netns) + " pid="), std::string::npos);
  EXPECT_NE(dump.out.find(" nspid=1 "), std::string::npos) << "the spawner, pid 1 inside";
}

// `--netns /proc/PID/ns/net` with -p: a container's namespace named from the
// host through one of its processes; traffic of the host namespace is not kept.
TEST(Containers, NetnsOfAContainerProcessFiltersCapture) {
  REQUIRE_BPF();
  TempDir tmp;
  // A container process that waits, then sends datagrams on its own loopback.
  std::string go = tmp / "go", script = tmp / "sender.sh";
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  std::ofstream(script) << "ip link set lo up\nread x < " << go << "\n"
                        << build_dir().string() << "/tests/spawner --children 1 --events 1 --udp 48999\n";
  Proc ctr("unshare --net --pid --fork --mount-proc sh " + script, tmp / "ctr.out", tmp / "ctr.err");
  pid_t host = wait_for_descendant(ctr.pid, "sh", 10);
  ASSERT_GT(host, 0);
  Proc rec(record_cmd(tmp / "t", "--net --netns /proc/" + std::to_string(host) + "/ns/net"), tmp / "rec.out",
           tmp / "rec.err");
  ASSERT_TRUE(attached(rec));
  // Host traffic meanwhile, which the filter must leave out.
  run(build_dir().string() + "/tests/spawner --children 1 --events 1 --udp 48998", tmp);
  std::ofstream(go) << "go\n";
  ASSERT_EQ(ctr.wait(60), 0) << read_file(tmp / "ctr.err");
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(60), 0) << read_file(tmp / "rec.err");
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  uint64_t sends = 0, to_host_port = 0;
  tr.for_each_net_event([&](const NetEvent& e) {
    if (e.r.kind == CP_NET_SOCK_SEND) sends++;
    if (e.r.dport == 48998) to_host_port++;
  });
  EXPECT_EQ(sends, 12u) << "the container's spawner and its 3 programs, 3 datagrams each";
  EXPECT_EQ(to_host_port, 0u);
}
