// TSC trust on the real machine: `cptrace check` names the kernel's verdict and
// the measured skew, and `record` writes both into meta.json ("tsc").
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "record_util.h"
#include "test_util.h"
#include "clock/tsc_verdict.h"

using namespace cptrace;
using namespace testutil;

namespace {

// The whole line of `out` that holds `what` ("" if none).
std::string line_with(const std::string& out, const std::string& what) {
  auto at = out.find(what);
  if (at == std::string::npos) return "";
  auto start = out.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return out.substr(start, out.find('\n', at) - start);
}

TEST(CheckTsc, NamesTheKernelsVerdictAndTheSkew) {
  TempDir tmp;
  auto r = run(cptrace_bin() + " check", tmp);
  std::string verdict = line_with(r.out, "TSC (kernel's verdict)");
  ASSERT_FALSE(verdict.empty()) << r.out;
  TscVerdict v = read_tsc_verdict();  // what this machine's texts say
  const char* status = v.trust == TscTrust::Trusted ? "ok " : "warn ";  // distrusted: record checks it
  EXPECT_EQ(verdict.rfind(status, 0), 0u) << verdict;
  EXPECT_NE(verdict.find(std::string(v.name()) + ": "), std::string::npos) << verdict;
  std::string skew = line_with(r.out, "TSC skew across CPUs");
  ASSERT_FALSE(skew.empty()) << r.out;
  EXPECT_NE(skew.find(" ms)"), std::string::npos) << skew;  // the time it took is shown
  fmt::print("{}\n{}\n", verdict, skew);
}

// meta.json "tsc": the verdict, the widest skew interval at start and stop, and
// the measures taken while recording, each holding 0 on this machine's one
// shared TSC. No flag is needed whatever the kernel's verdict: a TSC it
// distrusts is recorded and checked.
TEST(CheckTsc, RecordWritesVerdictAndSkewIntoMeta) {
  REQUIRE_BPF();
  TempDir tmp;
  // 400 events 5 ms apart: two seconds, for measures every 0.1 s of which two
  // are asked: room for a busy host to delay them.
  auto r = run(record_cmd(tmp / "t", "--skew-period 0.1") + " -- " + workload() +
                   " --threads 1 --events 400 --channels 1 --mode single --pace-us 5000",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto meta = nlohmann::json::parse(read_file(tmp.path / "t" / "meta.json"));
  ASSERT_TRUE(meta.contains("tsc")) << meta.dump(2);
  const auto& t = meta["tsc"];
  EXPECT_EQ(t["verdict"], read_tsc_verdict().name());
  EXPECT_FALSE(t["reason"].get<std::string>().empty());
  for (const char* at : {"at_start", "at_stop"}) {
    const auto& iv = t["skew_ticks"][at];
    ASSERT_TRUE(iv.is_array()) << at << ": " << t.dump(2);
    EXPECT_LE(iv[0].get<int64_t>(), 0) << at;
    EXPECT_GE(iv[1].get<int64_t>(), 0) << at;
  }
  const auto& periodic = t["skew"]["periodic"];
  ASSERT_GE(periodic.size(), 2u) << t.dump(2);
  for (const auto& m : periodic)
    for (const auto& c : m["cpus"]) {
      EXPECT_LE(c["lo"].get<int64_t>(), 0) << m.dump();
      EXPECT_GE(c["hi"].get<int64_t>(), 0) << m.dump();
    }
  r = run(cptrace_bin() + " info " + (tmp / "t"), tmp);
  EXPECT_NE(line_with(r.out, "tsc        ").find(" by the kernel: "), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "tsc skew").find("at start ["), std::string::npos) << r.out;
  // One shared TSC: every measure met the start and stop intervals.
  EXPECT_NE(line_with(r.out, "tsc check").find(fmt::format("{} measures while recording", periodic.size())),
            std::string::npos)
      << r.out;
  EXPECT_NE(line_with(r.out, "tsc check").find("met its start and stop ones"), std::string::npos) << r.out;
}

// The old flag still runs, with a note that it does nothing now.
TEST(CheckTsc, AcceptUnstableTscIsANoOpWithANote) {
  REQUIRE_BPF();
  TempDir tmp;
  auto r = run(record_cmd(tmp / "t", "--accept-unstable-tsc") + " -- " + workload() +
                   " --threads 1 --events 10 --channels 1 --mode single",
               tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--accept-unstable-tsc is no longer needed"), std::string::npos) << r.err;
}

}  // namespace
