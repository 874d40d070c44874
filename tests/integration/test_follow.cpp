// record -p / -- CMD follow the process tree (user/record/process_follower.h,
// lib/follow_wait.c): every process the recorded one starts after the attach
// is recorded from its first event, whichever way it was started; --no-inherit
// records the one process; a follow mark without a recorder behind it never
// keeps a process waiting for good.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cptrace_net.h"
#include "record/process_follower.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;
namespace fs = std::filesystem;

namespace {

std::string spawner() { return (build_dir() / "tests" / "spawner").string(); }
std::string prefork() { return (build_dir() / "tests" / "prefork").string(); }

// User events per (channel name, pid).
std::map<std::pair<std::string, uint32_t>, uint64_t> per_process(const std::string& dir) {
  TraceReader tr(dir);
  EXPECT_FALSE(tr.error()) << tr.error()->what();
  std::map<std::pair<std::string, uint32_t>, uint64_t> n;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User)) n[{tr.channel_name(e.channel), e.pid}]++;
  });
  return n;
}

nlohmann::json meta(const std::string& dir) { return nlohmann::json::parse(read_file(fs::path(dir) / "meta.json")); }

uint64_t pid_namespace_inode() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

// fork+exec, posix_spawn and vfork+exec: 3 x 3 started programs, each one
// recorded exactly under its own pid, beside the parent.
TEST(Follow, ProgramsStartedEveryWayAreRecorded) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t") + " -- " + spawner() + " --children 3 --events 20", tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto s = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"pid\"")));
  uint32_t root = s.value("pid", 0u);
  auto n = per_process(tmp / "t");
  uint64_t spawned = 0;
  for (const auto& [key, count] : n) {
    if (key.first == "spawner") {
      EXPECT_EQ(key.second, root);
      EXPECT_EQ(count, 40u);
    } else {
      EXPECT_EQ(key.first, "spawned");
      EXPECT_NE(key.second, root);
      EXPECT_EQ(count, 20u) << "pid " << key.second;
      spawned++;
    }
  }
  EXPECT_EQ(spawned, 9u);
  auto m = meta(tmp / "t");
  EXPECT_EQ(m["follow"].value("processes", 0u), 9u) << m.dump();
  EXPECT_EQ(m["follow"].value("gone_before_attach", 1u), 0u);
  EXPECT_FALSE(fs::exists(fs::path(kFollowDir) / std::to_string(root))) << "follow mark left behind";
}

// --net follows the same tree: each started program's datagrams are in the
// trace under its own pid.
TEST(Follow, NetworkCaptureFollowsTheTree) {
  REQUIRE_BPF();
  TempDir tmp;
  const int port = 47000 + getpid() % 1000;
  auto r = run(
      record_cmd(tmp / "t", "--net") + " -- " + spawner() + " --children 1 --events 5 --udp " + std::to_string(port),
      tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  uint32_t root = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"pid\""))).value("pid", 0u);
  std::map<uint32_t, uint64_t> sends;  // bytes per pid
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  tr.for_each_net_event([&](const NetEvent& e) {
    if (e.r.kind == CP_NET_SOCK_SEND) sends[e.r.pid] += e.r.len;
  });
  ASSERT_EQ(sends.size(), 4u) << "the spawner and its 3 programs";
  EXPECT_EQ(sends.count(root), 1u);
  for (const auto& [pid, bytes] : sends) EXPECT_EQ(bytes, 300u) << "pid " << pid;
}

TEST(Follow, NoInheritRecordsTheOneProcess) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t", "--no-inherit") + " -- " + spawner() + " --children 2 --events 20", tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto n = per_process(tmp / "t");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n.begin()->first.first, "spawner");
  EXPECT_EQ(n.begin()->second, 40u);
  EXPECT_FALSE(meta(tmp / "t").contains("follow"));
}

// A mark whose recorder pid is alive but attaches nothing (here: this test
// process): the workers wait their bound, then run on; none hangs or fails.
TEST(Follow, MarkWithoutAttachingRecorderOnlyDelays) {
  TempDir tmp;
  Proc w(prefork() + " --wait-signal --rounds 1 --workers 2 --events 10", tmp / "w.out", tmp / "w.err");
  ASSERT_TRUE(w.wait_for("READY", 20)) << read_file(tmp / "w.err");
  fs::create_directories(kFollowDir);
  // Under the name the library looks for: "<pid namespace inode>.<pid>".
  fs::path mark = fs::path(kFollowDir) / (std::to_string(pid_namespace_inode()) + "." + std::to_string(w.pid));
  std::ofstream(mark) << getpid();
  kill(w.pid, SIGUSR1);
  int status = w.wait(60);
  fs::remove(mark);
  EXPECT_EQ(status, 0) << read_file(tmp / "w.out") << read_file(tmp / "w.err");
}

// Children trust the marks: a /run/cptrace planted as a symlink (to a
// directory anybody may write) is refused, with a clear error, before the trace
// exists.
TEST(Follow, SymlinkedMarkDirectoryIsRefused) {
  REQUIRE_BPF();
  TempDir tmp;
  fs::path top = "/run/cptrace", saved = "/run/cptrace.test-saved";
  struct Restore {
    fs::path top, saved;
    bool had;
    ~Restore() {
      std::error_code ec;
      if (fs::is_symlink(top, ec)) fs::remove(top, ec);
      if (had) fs::rename(saved, top, ec);
    }
  } restore{top, saved, fs::exists(top)};
  if (restore.had) fs::rename(top, saved);
  fs::create_directory(tmp.path / "open");
  fs::permissions(tmp.path / "open", fs::perms::all);
  fs::create_directory_symlink(tmp.path / "open", top);
  auto r = run(record_cmd(tmp / "t") + " -- " + spawner() + " --children 1", tmp);
  EXPECT_NE(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("a symlink is refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-inherit"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "t")) << "the trace directory was created before the refusal";
  EXPECT_TRUE(fs::is_empty(tmp.path / "open")) << "a mark was written through the symlink";
}

// Marks of recorders that are gone are removed; a live recorder's stay.
TEST(Follow, StaleMarksAreRemoved) {
  TempDir tmp;
  fs::create_directories(tmp.path / "f");
  std::ofstream(tmp.path / "f" / "101") << dead_pid();
  std::ofstream(tmp.path / "f" / "102") << getpid();
  std::ofstream(tmp.path / "f" / "103") << "junk";
  int fd = open((tmp.path / "f").c_str(), O_DIRECTORY | O_RDONLY);
  ASSERT_GE(fd, 0);
  remove_stale_follow_files(fd);
  close(fd);
  EXPECT_FALSE(fs::exists(tmp.path / "f" / "101"));
  EXPECT_TRUE(fs::exists(tmp.path / "f" / "102"));
  EXPECT_FALSE(fs::exists(tmp.path / "f" / "103"));
}
