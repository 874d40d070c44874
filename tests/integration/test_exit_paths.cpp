// Nothing lost at exit (lib/batch.c, bpf/cptrace.bpf.c cp_tbuf_exit): events
// still in thread buffers reach the trace however a thread or process ends:
// threads parked at exit(), _exit, death by SIGTERM, SIGKILL mid-batch, and
// threads that return without flushing. tests/workloads/exit_paths.c.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "record_util.h"
#include "test_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;
namespace fs = std::filesystem;

namespace {

std::string exit_paths() { return (build_dir() / "tests" / "exit_paths").string(); }

// Every channel's events exactly: recorded + dropped == emitted, nothing
// unreadable at exit.
void expect_all_there(const std::string& dir, const std::string& out) {
  auto s = nlohmann::json::parse(out.substr(out.rfind("{\"emitted\"")));
  EXPECT_EQ(s.value("failed", -1), 0) << out;
  TraceReader tr(dir);
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  std::map<std::string, uint64_t> n;
  tr.for_each_event([&](const TraceEvent& e) {
    if (e.kind == uint8_t(EventKind::User)) n[tr.channel_name(e.channel)]++;
  });
  uint64_t emitted = 0, recorded = 0;
  for (const auto& [name, count] : s["emitted"].items()) {
    EXPECT_EQ(n[name], count.get<uint64_t>()) << "channel " << name;
    emitted += count.get<uint64_t>();
    recorded += n[name];
  }
  EXPECT_EQ(recorded + tr.counters().total_dropped(), emitted);
  auto meta = nlohmann::json::parse(read_file(fs::path(dir) / "meta.json"));
  EXPECT_EQ(meta["thread_exit"].value("unreadable_buffers", 1u), 0u) << meta["thread_exit"].dump();
  EXPECT_EQ(meta["thread_exit"].value("untracked_buffers", 1u), 0u);
}

}  // namespace

TEST(ExitPaths, EveryEndingUnderCommand) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t") + " -- " + exit_paths() + " --events 1000", tmp);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  expect_all_there(tmp / "t", r.out);
}

TEST(ExitPaths, EveryEndingUnderLib) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string lib = fs::canonical(build_dir() / "libcptrace.so").string();
  Proc rec(record_cmd(tmp / "t") + " --lib " + lib, tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  auto r = run(exit_paths() + " --events 777", tmp);
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  expect_all_there(tmp / "t", r.out);
}
