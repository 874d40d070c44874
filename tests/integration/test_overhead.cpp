// `cptrace overhead`: the displacement measurement of a workload whose CPU time
// is known (tests/workloads/burn.c burns exactly MS ms of its own CPU time)
// must match that CPU time. The spinner and the workload share one CPU; --nice
// -20 gives them an autogroup of their own, so other sessions on this (shared,
// busy) machine barely enter the run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>

#include "test_util.h"

using namespace testutil;
using nlohmann::json;

namespace {

int last_allowed_cpu() {
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  int last = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) last = c;
  return last;
}

json measure(const std::string& cmd, TempDir& tmp) {
  auto r = run(cptrace_bin() + " overhead --json --nice -20 --cpus " + std::to_string(last_allowed_cpu()) +
                   " -- " + cmd, tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

std::string burn() { return (build_dir() / "tests" / "burn").string(); }

}  // namespace

// Always busy: the spinner gets (almost) nothing during the run.
TEST(Overhead, BusyWorkloadDisplacesItsCpuTime) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: --nice -20 needs root (CAP_SYS_NICE)";
  TempDir tmp;
  json j = measure(burn() + " 400", tmp);
  double displaced = j["displaced_cpu_s"], ru = double(j["rusage_user_s"]) + double(j["rusage_sys_s"]);
  EXPECT_NEAR(displaced, 0.400, 0.03 * 0.400) << j.dump();
  EXPECT_NEAR(displaced, ru, 0.03 * ru) << j.dump();
}

// Busy 5 x 40 ms with sleeps between: most of the run is the spinner's, so the
// result rests on its calibrated rate (units -> seconds), not on the wall time.
TEST(Overhead, PartlyIdleWorkloadDisplacesItsCpuTime) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: --nice -20 needs root (CAP_SYS_NICE)";
  TempDir tmp;
  json j = measure("sh -c 'for i in 1 2 3 4 5; do " + burn() + " 40; sleep 0.1; done'", tmp);
  double displaced = j["displaced_cpu_s"], ru = double(j["rusage_user_s"]) + double(j["rusage_sys_s"]);
  double wall = j["wall_s"];
  ASSERT_GT(wall, 2 * ru) << "the workload was not mostly idle: " << j.dump();
  EXPECT_GE(ru, 0.200);
  EXPECT_NEAR(displaced, ru, 0.03 * ru) << j.dump();
}
