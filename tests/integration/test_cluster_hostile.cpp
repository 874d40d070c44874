// A node that answers the controller with bytes no agent sends: its transport
// is a script that answers `cptrace --version` as the real binary does (so the
// run starts) and then plays a hostile agent. Each stream ends that node's part
// with a clear error naming the node and what was wrong, the controller exits
// 1 (never an exception's text, never a crash), bytes from the node reach the
// terminal escaped, and nothing is written outside RUN/NODE/ and RUN/cluster.json.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/agent_wire.h"
#include "test_util.h"

namespace cptrace {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;

std::string frame(WireType t, uint64_t offset, const std::string& data) {
  return encode_wire(t, offset, data.data(), data.size());
}

std::string hello() { return frame(WireType::Hello, 0, R"({"node":"h"})"); }

// A header claiming `len` bytes that never come.
std::string header_only(uint32_t len) {
  std::string h = frame(WireType::Events, 0, "");
  std::memcpy(h.data() + 16, &len, 4);
  return h;
}

// Runs `cluster record` with one node, whose agent sends `stream`.
testutil::RunResult run_hostile(const TempDir& tmp, const std::string& stream) {
  std::ofstream(tmp / "stream.bin", std::ios::binary) << stream;
  std::ofstream(tmp / "fake.sh") << "#!/bin/sh\nfor a in \"$@\"; do last=$a; done\n"
                                 << "[ \"$last\" = --version ] && exec " << testutil::cptrace_bin() << " --version\n"
                                 << "cat >/dev/null &\ncat " << (tmp / "stream.bin") << "\nsleep 1\n";
  fs::permissions(tmp / "fake.sh", fs::perms::owner_all);
  nlohmann::json nodes = {{"nodes", {{{"name", "h"}, {"transport", {tmp / "fake.sh"}}, {"minrtt", "127.0.0.1"}}}}};
  std::ofstream(tmp / "nodes.json") << nodes.dump();
  return testutil::run(testutil::cptrace_bin() + " cluster record " + (tmp / "nodes.json") + " -o " + (tmp / "run") +
                           " --controller-timeout 5 -- true",
                       tmp);
}

// What the run left: every path under tmp, relative.
std::set<std::string> files_under(const TempDir& tmp) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(tmp.path))
    out.insert(fs::relative(e.path(), tmp.path).string());
  return out;
}

void expect_refused(const std::string& stream, const std::string& why) {
  TempDir tmp;
  auto r = run_hostile(tmp, stream);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("node h: trace incomplete: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  for (char c : r.err)
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "a raw byte reached the terminal: " << r.err;
  std::set<std::string> allowed = {"stream.bin", "fake.sh",          "nodes.json",
                                   "run.out",    "run.err",  // the test's own
                                   "run",        "run/cluster.json", "run/h"};
  for (const std::string& f : files_under(tmp))
    EXPECT_TRUE(allowed.count(f) || f.rfind("run/h/", 0) == 0) << "written outside RUN/NODE/: " << f;
}

TEST(ClusterHostile, DoneFrameThatIsNotJson) {
  expect_refused(hello() + frame(WireType::Done, 0, "{not json\x01\x1b[2J"),
                 "its Done frame is not a JSON object: \"{not json\\x01\\x1b[2J\"");
}

TEST(ClusterHostile, DoneFrameWithAFieldOfAnotherType) {
  expect_refused(hello() + frame(WireType::Done, 0, R"({"status":0,"events_bytes":"all of them"})"),
                 "its Done frame's \"events_bytes\" is not a byte count");
}

TEST(ClusterHostile, EventsPastTheEndAndWrappingOffsets) {
  expect_refused(hello() + frame(WireType::Events, uint64_t(1) << 40, "CPTRACE!"),
                 "stream skipped bytes 0..1099511627776 of events.cpt");
  expect_refused(hello() + frame(WireType::Events, 0, std::string(16, 'x')) +
                     frame(WireType::Events, UINT64_MAX - 7, std::string(16, 'y')),
                 "stream skipped bytes 16..18446744073709551608");
}

TEST(ClusterHostile, LengthOfFourGibibytesAndGarbage) {
  expect_refused(hello() + header_only(0xffffffffu), "not a cptrace agent stream (starts with \"CPAG\\x02\\x00");
  expect_refused(std::string("../../etc/passwd\n\x00\xff/../../root/.ssh", 31),
                 "not a cptrace agent stream (starts with \"../../etc");
}

}  // namespace
}  // namespace cptrace
