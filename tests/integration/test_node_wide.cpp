// Recording every instrumented process of the node (record --all) and
// following a command into containers, with containers made the way runtimes
// make them: own mount, pid and network namespaces, an image directory holding
// its own COPY of libcptrace.so (another file than any of the host's), its own
// /run (a tmpfs: no follow mark of the host is visible), chroot into it, and a
// cgroup named like a runtime's (docker-<id>.scope). New processes meet the
// recorder through the hello (include/cptrace_records.h): every event they log
// is in the trace, exactly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;
namespace fs = std::filesystem;

namespace {

// ROOT BUILD CGROUP CMD...: run under `unshare --mount --pid --net --fork`.
// Joins CGROUP (a cgroup v2 directory), builds the image in a tmpfs at ROOT
// (the host's /usr, /etc, /dev, /sys bound in; /app with copies of the library,
// the workloads and the Java parts; an empty /run of its own), then chroot,
// /proc of the new pid namespace, and CMD as a child of the container's first
// process.
constexpr const char* kContainerScript = R"SH(set -e
R=$1 B=$2 CG=$3
shift 3
mkdir -p "$CG" && echo 0 > "$CG/cgroup.procs"
mount -t tmpfs -o mode=0755 cptrace-img "$R"
mkdir "$R/usr" "$R/etc" "$R/dev" "$R/sys" "$R/proc" "$R/tmp" "$R/run" "$R/app"
for d in usr etc dev sys; do mount --rbind "/$d" "$R/$d"; done
for l in bin sbin lib lib64; do if [ -L "/$l" ]; then ln -s "$(readlink "/$l")" "$R/$l"; fi; done
mount -t tmpfs -o mode=0755 cptrace-run "$R/run"
cp "$B/libcptrace.so" "$B/tests/workload" "$B/tests/spawner" "$R/app/"
if [ -f "$B/cptrace.jar" ]; then cp "$B/cptrace.jar" "$B/libcptrace_jni.so" "$B/tests/java/JniWorkload.class" "$R/app/"; fi
ip link set lo up
exec chroot "$R" /bin/sh -c 'mount -t proc proc /proc; "$@"; exit $?' sh "$@"
)SH";

// Where cgroup v2 is mounted ("" if nowhere).
std::string cgroup2_root() {
  std::ifstream mi("/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream f(line);
    std::string id, parent, devno, root, mnt;
    f >> id >> parent >> devno >> root >> mnt;
    return mnt;
  }
  return "";
}

std::string random_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 64; i++) id += "0123456789abcdef"[rd() % 16];
  return id;
}

// A container as a runtime starts one; `cgroup` is its path as /proc/PID/cgroup shows it.
struct Container {
  std::string id, cgroup, dir;
  std::unique_ptr<Proc> proc;

  Container(const TempDir& tmp, const std::string& name, const std::string& cmd) {
    std::string cg2 = cgroup2_root();
    EXPECT_FALSE(cg2.empty()) << "no cgroup v2 mount";
    id = random_id();
    cgroup = "/cptrace-test-" + std::to_string(getpid()) + "/docker-" + id + ".scope";
    dir = cg2 + cgroup;
    std::string script = tmp / "container.sh";
    if (!fs::exists(script)) std::ofstream(script) << kContainerScript;
    fs::create_directories(tmp.path / name);
    proc = std::make_unique<Proc>("unshare --mount --pid --net --fork sh " + script + " " + (tmp / name) + " " +
                                      build_dir().string() + " " + dir + " " + cmd,
                                  tmp / (name + ".out"), tmp / (name + ".err"));
  }
  ~Container() {
    proc.reset();
    std::error_code ec;
    fs::remove(dir, ec);
    fs::remove(fs::path(dir).parent_path(), ec);  // the last one removes the parent
  }
  std::string out() const { return read_file(proc->out_path); }
  std::string err() const { return read_file(proc->err_path); }
};

// The process named `comm` among the descendants of `root` (0 if none).
pid_t find_descendant(pid_t root, const std::string& comm) {
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    if (p != root && read_file("/proc/" + std::to_string(p) + "/comm") == comm + "\n") return p;
    std::istringstream kids(read_file("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children"));
    for (pid_t k; kids >> k;) todo.push_back(k);
  }
  return 0;
}

// Every JSON line a process of the container printed, parsed.
std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("{")) v.push_back(nlohmann::json::parse(line));
  return v;
}

// User events of the trace per container id (the pid table's), and the
// processes of each; events of a pid the table does not place count under "".
struct PerContainer {
  std::map<std::string, uint64_t> events;
  std::map<std::string, std::set<uint32_t>> pids;
};

PerContainer per_container(const TraceReader& tr) {
  PerContainer r;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    auto it = tr.pids().by_pid.find(e.pid);
    std::string id = it == tr.pids().by_pid.end() ? "" : it->second.container_id;
    r.events[id]++;
    r.pids[id].insert(e.pid);
  });
  return r;
}

std::unique_ptr<Proc> start_recorder(const TempDir& tmp, const std::string& args) {
  auto rec =
      std::make_unique<Proc>(record_cmd(tmp / "t", "--ring-mb 64") + " " + args, tmp / "rec.out", tmp / "rec.err");
  EXPECT_TRUE(attached(*rec, 60));
  return rec;
}

}  // namespace

// record --all: a container started before the recording (its workload waits
// for a signal before logging) and three started together after it, each with
// its own copy of the library: a workload that ends mid-run, a spawner whose
// children start by fork+exec, posix_spawn and vfork+exec, and a paced
// workload. Every event of each container is in the trace, under the
// container's id, and the new processes were answered.
TEST(NodeWide, ContainersStartedBeforeAndAfterTheRecordingExactly) {
  REQUIRE_BPF();
  TempDir tmp;
  Container a(tmp, "a", "env LD_LIBRARY_PATH=/app /app/workload --wait-signal --threads 2 --events 4000 --channels 2");
  ASSERT_TRUE(a.proc->wait_for("READY", 30)) << a.err();
  pid_t a_host = find_descendant(a.proc->pid, "workload");
  ASSERT_GT(a_host, 0);

  auto rec = start_recorder(tmp, "--all");
  kill(a_host, SIGUSR1);
  Container b(tmp, "b", "env LD_LIBRARY_PATH=/app /app/workload --threads 2 --events 3000 --channels 3");
  Container c(tmp, "c", "env LD_LIBRARY_PATH=/app /app/spawner --children 3 --events 200");
  Container d(tmp, "d", "env LD_LIBRARY_PATH=/app /app/workload --threads 1 --events 2000 --pace-us 300");
  for (Container* k : {&a, &b, &c, &d}) ASSERT_EQ(k->proc->wait(60), 0) << k->err();
  kill(rec->pid, SIGINT);
  ASSERT_EQ(rec->wait(60), 0) << read_file(tmp / "rec.err");

  std::map<std::string, uint64_t> emitted;
  for (Container* k : {&a, &b, &d}) {
    auto lines = json_lines(k->out());
    ASSERT_EQ(lines.size(), 1u) << k->out();
    emitted[k->id] = lines[0]["total"].get<uint64_t>();
  }
  auto s = json_lines(c.out());
  ASSERT_EQ(s.size(), 1u) << c.out();
  EXPECT_EQ(s[0]["started"], 9u);
  emitted[c.id] = 2 * 200 + 9 * 200;
  EXPECT_EQ(emitted[a.id], 8000u);

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  PerContainer got = per_container(tr);
  for (Container* k : {&a, &b, &c, &d}) {
    EXPECT_EQ(got.events[k->id], emitted[k->id]) << "container " << k->cgroup;
    for (uint32_t pid : got.pids[k->id]) {
      const PidEntry& e = tr.pids().by_pid.at(pid);
      EXPECT_EQ(e.cgroup, k->cgroup);
      EXPECT_NE(e.nspid, pid) << "a container's pid inside differs from the host's";
    }
  }
  EXPECT_EQ(got.pids[a.id].size(), 1u);
  EXPECT_EQ(got.pids[c.id].size(), 10u) << "the spawner and its 9 children";
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  // b, d, the spawner and its 9 children said hello; a (running before) did not.
  EXPECT_GE(meta["hello"].value("answered", 0u), 12u) << meta["hello"].dump();
  EXPECT_EQ(meta["hello"].value("not_reported", 1u), 0u);
  std::cout << "hello: " << meta["hello"].dump() << "\n";  // the waits, for the record
  bool copy_added = false;
  for (const auto& t : meta["targets_added"]) copy_added |= t.get<std::string>().find("/proc/") == 0;
  EXPECT_TRUE(copy_added) << meta["targets_added"].dump() << ": the containers' copies are reached through /proc";
}

// record -- CMD where CMD makes a container with its own /run and a copy of
// the library: the recorder knows only the library that came with it when it
// starts; the spawner in the container says hello, its copy is attached for
// it, and every process of the tree started inside (fork+exec, posix_spawn,
// vfork+exec, each after its parent said hello) is recorded exactly.
TEST(NodeWide, CommandStartingAContainerWithItsOwnCopyAndRun) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string cg2 = cgroup2_root();
  ASSERT_FALSE(cg2.empty());
  std::string id = random_id(), cgroup = "/cptrace-test-" + std::to_string(getpid()) + "-cmd/docker-" + id + ".scope";
  std::ofstream(tmp / "container.sh") << kContainerScript;
  fs::create_directories(tmp.path / "root");
  auto r = run(record_cmd(tmp / "t") + " -- unshare --mount --pid --net --fork sh " + (tmp / "container.sh") + " " +
                   (tmp / "root") + " " + build_dir().string() + " " + cg2 + cgroup +
                   " env LD_LIBRARY_PATH=/app /app/spawner --children 2 --events 300",
               tmp);
  std::error_code ec;
  fs::remove(cg2 + cgroup, ec);
  fs::remove(fs::path(cg2 + cgroup).parent_path(), ec);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto s = json_lines(r.out);
  ASSERT_EQ(s.size(), 1u) << r.out;
  EXPECT_EQ(s[0]["started"], 6u);

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  PerContainer got = per_container(tr);
  EXPECT_EQ(got.events[id], 2 * 300u + 6 * 300u);
  EXPECT_EQ(got.events.size(), 1u) << "every event under the container's id";
  EXPECT_EQ(got.pids[id].size(), 7u);
  const Counters& c = tr.counters();
  EXPECT_EQ(c.total_dropped(), 0u);
  EXPECT_EQ(c.total_seen(), tr.event_count());
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  EXPECT_GE(meta["follow"].value("hello_answered", 0u), 7u) << meta["follow"].dump();
  std::cout << "follow: " << meta["follow"].dump() << "\n";
  EXPECT_EQ(meta["targets_added"].size(), 1u) << meta["targets_added"].dump();
}

// An unmodified JVM in a container started after `record --all`: it loads the
// container's copy of libcptrace_jni.so with System.load, says hello from it,
// and every event of its threads is in the trace.
TEST(NodeWide, JvmInAContainerStartedAfterTheRecording) {
  REQUIRE_BPF();
  ASSERT_TRUE(fs::exists(build_dir() / "cptrace.jar") && fs::exists(build_dir() / "tests/java/JniWorkload.class"))
      << "the Java parts were not built (no JDK at build time?)";
  TempDir tmp;
  auto rec = start_recorder(tmp, "--all");
  constexpr uint64_t kEvents = 5000, kThreads = 2;
  Container j(tmp, "jvm",
              "java -Xshare:auto -cp /app/cptrace.jar:/app JniWorkload --threads " + std::to_string(kThreads) +
                  " --events " + std::to_string(kEvents) + " --channels 2 --mode single");
  ASSERT_EQ(j.proc->wait(60), 0) << j.err();
  kill(rec->pid, SIGINT);
  ASSERT_EQ(rec->wait(60), 0) << read_file(tmp / "rec.err");
  EXPECT_NE(j.out().find("DONE " + std::to_string(kThreads * kEvents)), std::string::npos) << j.out();

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  PerContainer got = per_container(tr);
  EXPECT_EQ(got.events[j.id], kThreads * kEvents);
  ASSERT_EQ(got.pids[j.id].size(), 1u);
  std::set<std::string> names;
  uint32_t jvm = *got.pids[j.id].begin();
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.pid == jvm) names.insert(tr.channel_name(e.channel));
  });
  EXPECT_EQ(names, (std::set<std::string>{"java.chan0", "java.chan1"}));
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
}

// record -p of a running process (a shell with libcptrace preloaded) that later
// starts a container, own /run and own copy: the container's workload, two
// execs down the tree, says hello and is recorded exactly, under the
// container's id; the recording ends with the recorded process.
TEST(NodeWide, PidFollowsIntoAContainerStartedLater) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string cg2 = cgroup2_root();
  ASSERT_FALSE(cg2.empty());
  std::string id = random_id(), cgroup = "/cptrace-test-" + std::to_string(getpid()) + "-p/docker-" + id + ".scope";
  std::ofstream(tmp / "container.sh") << kContainerScript;
  fs::create_directories(tmp.path / "root");
  std::ofstream(tmp / "outer.sh") << "while [ ! -e " + (tmp / "go") +
                                         " ]; do sleep 0.05; done\nexec unshare --mount --pid --net --fork sh " +
                                         (tmp / "container.sh") + " " + (tmp / "root") + " " + build_dir().string() +
                                         " " + cg2 + cgroup +
                                         " env LD_LIBRARY_PATH=/app /app/workload --threads 2 --events 3000\n";
  Proc outer("env LD_PRELOAD=" + (build_dir() / "libcptrace.so").string() + " sh " + (tmp / "outer.sh"),
             tmp / "outer.out", tmp / "outer.err");
  // Until the shell runs with the library loaded (before its exec, the pid is a
  // copy of this test binary, which links libcptrace too).
  std::string proc = "/proc/" + std::to_string(outer.pid);
  for (int i = 0; i < 500 && (read_file(proc + "/comm") != "sh\n" ||
                              read_file(proc + "/maps").find("libcptrace.so") == std::string::npos);
       i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string maps = read_file(proc + "/maps");
  ASSERT_NE(maps.find("libcptrace.so"), std::string::npos) << maps << read_file(tmp / "outer.err");
  auto rec = start_recorder(tmp, "-p " + std::to_string(outer.pid));
  std::ofstream(tmp / "go").put('\n');
  ASSERT_EQ(outer.wait(60), 0) << read_file(tmp / "outer.err");
  ASSERT_EQ(rec->wait(60), 0) << read_file(tmp / "rec.err");
  std::error_code ec;
  fs::remove(cg2 + cgroup, ec);
  fs::remove(fs::path(cg2 + cgroup).parent_path(), ec);
  auto lines = json_lines(read_file(tmp / "outer.out"));
  ASSERT_EQ(lines.size(), 1u) << read_file(tmp / "outer.out");
  EXPECT_EQ(lines[0]["total"], 6000u);

  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  PerContainer got = per_container(tr);
  EXPECT_EQ(got.events[id], 6000u);
  EXPECT_EQ(got.events.size(), 1u);
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  EXPECT_EQ(tr.counters().total_seen(), tr.event_count());
}

// A recorder that cannot answer (stopped) never hangs a process: its hello is
// seen, it waits at most its bound, and it runs to its end; killed, the
// recorder's program is gone with it, and a new process goes on at once.
TEST(NodeWide, UnansweredHelloIsBounded) {
  REQUIRE_BPF();
  TempDir tmp;
  auto rec = start_recorder(tmp, "--all");
  kill(rec->pid, SIGSTOP);
  std::string lib = "env LD_LIBRARY_PATH=" + build_dir().string() + " " + (build_dir() / "tests/workload").string();
  Proc w(lib + " --threads 1 --events 100", tmp / "w.out", tmp / "w.err");
  int st = w.wait(30);
  kill(rec->pid, SIGKILL);
  rec->wait(30);
  EXPECT_EQ(st, 0) << read_file(tmp / "w.err");
  EXPECT_EQ(json_lines(read_file(tmp / "w.out")).size(), 1u);
  Proc after(lib + " --threads 1 --events 100", tmp / "a.out", tmp / "a.err");
  EXPECT_EQ(after.wait(30), 0) << read_file(tmp / "a.err");
}

// Programs under the restrictions runtimes put on them, started after `record
// --all` (tests/workloads/sandboxed.c): a seccomp profile that kills the process
// on a prctl option no kernel knows (the option older libraries said hello
// with: the control shows the profile bites on it), every signal blocked
// (the hello's SIGURG among them), PR_SET_NO_NEW_PRIVS with no capabilities,
// and Docker's and containerd's default seccomp profiles with a container's
// default capabilities (tests/workloads/under_profile.cpp; the profiles from
// `make runtime-profiles`).
// Each runs to its end and every event it logs is recorded.
TEST(NodeWide, RestrictedProgramsKeepRunningAndAreRecorded) {
  REQUIRE_BPF();
  TempDir tmp;
  const std::string sandboxed = (build_dir() / "tests/sandboxed").string();
  auto old = run(sandboxed + " --kill-unknown-prctl --old-hello", tmp);
  ASSERT_EQ(old.status, 128 + SIGSYS) << "the profile must kill the old hello, or this proves nothing";
  const fs::path docker_profile = build_dir() / "profiles" / "docker-default.json";
  ASSERT_TRUE(fs::exists(docker_profile)) << docker_profile << " missing: make runtime-profiles fetches it";
  const std::string docker = (build_dir() / "tests/under_profile").string() + " " + docker_profile.string();
  auto bites = run(docker + " --check", tmp);
  ASSERT_EQ(bites.status, 0) << "Docker's profile must deny what it denies, or this proves nothing: " << bites.err;
  const fs::path containerd_profile = build_dir() / "profiles" / "containerd-default.json";
  ASSERT_TRUE(fs::exists(containerd_profile)) << containerd_profile << " missing: make runtime-profiles makes it";
  const std::string containerd = (build_dir() / "tests/under_profile").string() + " " + containerd_profile.string();
  auto bites_too = run(containerd + " --check", tmp);
  ASSERT_EQ(bites_too.status, 0) << "containerd's profile must deny what it denies: " << bites_too.err;

  auto rec = start_recorder(tmp, "--all");
  const std::string workload = "env LD_LIBRARY_PATH=" + build_dir().string() + " " +
                               (build_dir() / "tests/workload").string() + " --threads 2 --events 3000";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"seccomp", sandboxed + " --kill-unknown-prctl -- " + workload},
      {"blocked", sandboxed + " --block-signals -- " + workload + " --mode batch"},
      {"seccomp+blocked", sandboxed + " --kill-unknown-prctl --block-signals -- " + workload},
      {"no_new_privs", "setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- " + workload +
                           " --mode batch"},
      {"docker", docker + " -- " + workload},
      {"docker+batch", docker + " -- " + workload + " --mode batch"},
      {"containerd", containerd + " -- " + workload},
      {"containerd+batch", containerd + " -- " + workload + " --mode batch"},
  };
  std::map<uint32_t, std::string> pid_of;
  std::map<std::string, uint64_t> emitted;
  for (const auto& [name, cmd] : runs) {
    Proc p(cmd, tmp / (name + ".out"), tmp / (name + ".err"));
    ASSERT_EQ(p.wait(60), 0) << name << ": " << read_file(tmp / (name + ".err"));
    auto lines = json_lines(read_file(tmp / (name + ".out")));
    ASSERT_EQ(lines.size(), 1u) << name;
    pid_of[lines[0]["pid"].get<uint32_t>()] = name;
    emitted[name] = lines[0]["total"].get<uint64_t>();
  }
  kill(rec->pid, SIGINT);
  ASSERT_EQ(rec->wait(60), 0) << read_file(tmp / "rec.err");
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::map<std::string, uint64_t> got;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User) && pid_of.count(e.pid)) got[pid_of[e.pid]]++;
  });
  for (const auto& [name, cmd] : runs) {
    EXPECT_EQ(emitted[name], 6000u) << name;
    EXPECT_EQ(got[name], emitted[name]) << name << ": every event recorded";
  }
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  // Said and answered under the profiles too: the 8 workloads and the 3 sandboxed
  // (libcptrace's own process, before its filter; under_profile has no libcptrace).
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  EXPECT_GE(meta["hello"].value("answered", 0u), 11u) << meta["hello"].dump();
}

// ---- Running the node-wide recorder as a DaemonSet (deploy/cptrace-node.yaml) ----

namespace {

fs::path manifest_path() { return source_dir() / "deploy" / "cptrace-node.yaml"; }

// The manifest's documents, as JSON (python3-yaml, which yamllint brings).
std::vector<nlohmann::json> manifest_docs(const TempDir& tmp) {
  auto r = run("python3 -c 'import json,sys,yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))' " +
                   manifest_path().string(),
               tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out).get<std::vector<nlohmann::json>>()
                       : std::vector<nlohmann::json>{};
}

// The DaemonSet's pod spec and its one container.
struct NodePod {
  nlohmann::json pod, container;
  std::vector<std::string> caps;  // capabilities.add, "SYS_ADMIN" etc.
  std::string script;  // the container's `sh -c` script
};

NodePod node_pod(const TempDir& tmp) {
  NodePod p;
  for (const auto& d : manifest_docs(tmp))
    if (d.is_object() && d.value("kind", "") == "DaemonSet") p.pod = d["spec"]["template"]["spec"];
  EXPECT_TRUE(p.pod.is_object()) << "no DaemonSet in " << manifest_path();
  if (!p.pod.is_object()) return p;
  EXPECT_EQ(p.pod["containers"].size(), 1u);
  p.container = p.pod["containers"][0];
  p.caps = p.container["securityContext"]["capabilities"]["add"].get<std::vector<std::string>>();
  EXPECT_EQ(p.container["command"], nlohmann::json({"/bin/sh", "-c"}));
  p.script = p.container["args"][0].get<std::string>();
  return p;
}

// setpriv's options giving exactly `caps` (inheritable, and so permitted and
// effective across the exec of a root process; bounding) and nothing else.
std::string only_caps(const std::vector<std::string>& caps) {
  std::string list = "-all";
  for (std::string c : caps) {
    std::transform(c.begin(), c.end(), c.begin(), ::tolower);
    list += ",+" + c;
  }
  return "setpriv --inh-caps=" + list + " --ambient-caps=-all --bounding-set=" + list + " -- ";
}

uint64_t cap_mask(const std::vector<std::string>& caps) {
  static const std::map<std::string, int> numbers = {{"SYS_ADMIN", 21},     {"SYS_PTRACE", 19}, {"BPF", 39},
                                                     {"PERFMON", 38},       {"NET_ADMIN", 12},  {"SYS_RESOURCE", 24},
                                                     {"DAC_READ_SEARCH", 2}};
  uint64_t m = 0;
  for (const auto& c : caps) {
    EXPECT_TRUE(numbers.count(c)) << c << ": a capability this test does not know";
    if (numbers.count(c)) m |= uint64_t(1) << numbers.at(c);
  }
  return m;
}

// "CapEff" and so on of a process, as numbers.
std::map<std::string, uint64_t> cap_sets(pid_t pid) {
  std::map<std::string, uint64_t> r;
  std::istringstream st(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(st, line);)
    if (line.starts_with("Cap"))
      r[line.substr(0, line.find(':'))] = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
  return r;
}

}  // namespace

// The manifest's pod as the kubelet would run it, minus Kubernetes: its own
// script (the hourly loop, the SIGTERM stop), as root with exactly the
// manifest's capabilities, all others dropped from every set, the bounding set
// too. A container started after the recorder (root inside, so holding
// capabilities the recorder lacks) and a process of another user whose library
// lies in a directory only that user may read: every event of each is in the
// trace, and SIGTERM leaves a complete trace.
TEST(NodeWide, DaemonSetCapabilitiesRecordEveryProcessExactly) {
  REQUIRE_BPF();
  TempDir tmp;
  NodePod p = node_pod(tmp);
  ASSERT_FALSE(p.caps.empty());
  EXPECT_EQ(p.pod.value("hostPID", false), true);
  EXPECT_EQ(p.container["securityContext"].value("privileged", true), false);
  EXPECT_EQ(p.container["securityContext"]["capabilities"]["drop"], nlohmann::json({"ALL"}));
  std::ofstream(tmp / "node.sh") << p.script;
  fs::create_directories(tmp.path / "traces");
  Proc node("env PATH=" + build_dir().string() + ":$PATH NODE_NAME=test-node TRACES=" + (tmp / "traces") +
                " PEERS= " + only_caps(p.caps) + "sh " + (tmp / "node.sh"),
            tmp / "node.out", tmp / "node.err");
  ASSERT_TRUE(attached(node, 60));
  pid_t rec = find_descendant(node.pid, "cptrace");
  ASSERT_GT(rec, 0);
  auto sets = cap_sets(rec);
  uint64_t want = cap_mask(p.caps);
  for (const char* s : {"CapEff", "CapPrm", "CapBnd"}) EXPECT_EQ(sets[s], want) << s << " of the recorder";
  EXPECT_EQ(sets["CapAmb"], 0u);

  Container c(tmp, "c", "env LD_LIBRARY_PATH=/app /app/workload --threads 2 --events 3000 --channels 2");
  // The other user's library and program lie in its own private directory (a
  // copy: the build tree may be closed to that user, as a fresh mktemp -d is).
  fs::permissions(tmp.path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(tmp.path / "private");
  fs::copy_file(build_dir() / "libcptrace.so", tmp.path / "private" / "libcptrace.so");
  fs::copy_file(build_dir() / "tests" / "workload", tmp.path / "private" / "workload");
  ASSERT_EQ(run("chown -R 65534:65534 " + (tmp / "private") + " && chmod 700 " + (tmp / "private"), tmp).status, 0);
  Proc other("setpriv --reuid=65534 --regid=65534 --clear-groups env LD_LIBRARY_PATH=" + (tmp / "private") + " " +
                 (tmp.path / "private" / "workload").string() + " --threads 2 --events 2000",
             tmp / "other.out", tmp / "other.err");
  ASSERT_EQ(c.proc->wait(60), 0) << c.err();
  ASSERT_EQ(other.wait(60), 0) << read_file(tmp / "other.err");
  kill(node.pid, SIGTERM);
  ASSERT_EQ(node.wait(60), 0) << read_file(tmp / "node.err");

  auto lines = json_lines(c.out()), others = json_lines(read_file(tmp / "other.out"));
  ASSERT_EQ(lines.size(), 1u) << c.out();
  ASSERT_EQ(others.size(), 1u) << read_file(tmp / "other.out");
  EXPECT_EQ(lines[0]["total"], 6000u);
  EXPECT_EQ(others[0]["total"], 4000u);
  uint32_t other_pid = others[0]["pid"].get<uint32_t>();

  std::vector<fs::path> traces;
  for (const auto& e : fs::directory_iterator(tmp.path / "traces")) traces.push_back(e.path());
  ASSERT_EQ(traces.size(), 1u) << "one recording, stopped by SIGTERM";
  EXPECT_TRUE(traces[0].filename().string().starts_with("test-node-")) << traces[0];
  TraceReader tr(traces[0]);
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  PerContainer got = per_container(tr);
  EXPECT_EQ(got.events[c.id], 6000u) << "the container's workload";
  uint64_t of_other = 0;
  tr.for_each_event([&](const TraceEvent& e) { of_other += e.kind == uint8_t(EventKind::User) && e.pid == other_pid; });
  EXPECT_EQ(of_other, 4000u) << "the other user's workload; the recorder said: " << read_file(tmp / "node.err");
  EXPECT_EQ(tr.counters().total_dropped(), 0u);
  auto meta = nlohmann::json::parse(read_file(traces[0] / "meta.json"));
  EXPECT_EQ(meta.value("node", ""), "test-node");
  EXPECT_EQ(meta["hello"].value("not_reported", 1u), 0u);
}

// Each capability of the manifest is needed: without it the recorder stops at
// once (exit status 1, no trace) and names the capability it lacks.
TEST(NodeWide, EachDaemonSetCapabilityIsNamedWhenMissing) {
  REQUIRE_BPF();
  TempDir tmp;
  NodePod p = node_pod(tmp);
  ASSERT_FALSE(p.caps.empty());
  for (const std::string& missing : p.caps) {
    std::vector<std::string> rest;
    for (const auto& c : p.caps)
      if (c != missing) rest.push_back(c);
    fs::path dir = tmp / ("without-" + missing);
    auto r =
        run("timeout 60 " + only_caps(rest) + cptrace_bin() + " record --all --no-progress -o " + dir.string(), tmp);
    EXPECT_EQ(r.status, 1) << "without CAP_" << missing << ": " << r.err;
    EXPECT_NE(r.err.find("needs"), std::string::npos) << "without CAP_" << missing << ": " << r.err;
    EXPECT_NE(r.err.find("CAP_" + missing), std::string::npos) << "without CAP_" << missing << ": " << r.err;
    EXPECT_EQ(r.err.find("attached"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "meta.json")) << "no trace without CAP_" << missing;
  }
}

// The manifest passes yamllint, and every flag its script gives `cptrace
// record` is one the recorder accepts (the run above uses them all but those
// of --peers, which need other nodes).
TEST(NodeWide, DaemonSetManifestLintsAndItsFlagsExist) {
  TempDir tmp;
  auto lint = run("yamllint -s " + manifest_path().string(), tmp);
  EXPECT_EQ(lint.status, 0) << lint.out << lint.err;
  NodePod p = node_pod(tmp);
  auto help = run(cptrace_bin() + " record --help", tmp);
  ASSERT_EQ(help.status, 0) << help.err;
  static const std::regex flag(R"((^|[\s"])(--[a-z][a-z-]*|-o)(?=[\s"=]|$))");
  std::set<std::string> flags;
  for (std::sregex_iterator it(p.script.begin(), p.script.end(), flag), end; it != end; ++it) flags.insert((*it)[2]);
  for (const char* f : {"--all", "--node", "--duration", "-o", "--peers", "--key"}) EXPECT_TRUE(flags.count(f)) << f;
  for (const auto& f : flags)
    EXPECT_TRUE(std::regex_search(help.out, std::regex("(^|[\\s,])" + f + "([\\s,{]|$)")))
        << f << ": not an option of `cptrace record`";
}
