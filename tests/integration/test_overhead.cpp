// `cptrace overhead`: the displacement measurement of a workload whose CPU time
// is known (tests/workloads/burn.c burns exactly MS ms of its own CPU time)
// must match that CPU time. The spinner and the workload share one CPU; --nice
// -20 gives them an autogroup of their own, so other sessions on this (shared,
// busy) machine barely enter the run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>

#include <algorithm>

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
  auto r = run(
      cptrace_bin() + " overhead --json --nice -20 --cpus " + std::to_string(last_allowed_cpu()) + " -- " + cmd, tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

std::string burn() { return (build_dir() / "tests" / "burn").string(); }

// The displacement must match the command's CPU time up to what the same run
// measured: the tool's stated uncertainty (its spinner's calibration spread, and
// how far the units strayed from the scheduler's account of the spinner's CPU
// time) and whatever else ran on those CPUs meanwhile (`others`: the run's wall x
// CPUs minus the spinner's and the command's CPU time, both scheduler-accounted).
// No fixed share of the command's time: on a busy host other work enters the
// command's idle periods.
void expect_displacement_matches(const json& j, double* ru_out) {
  double displaced = j["displaced_cpu_s"], unc = j["uncertainty_s"];
  double ru = double(j["rusage_user_s"]) + double(j["rusage_sys_s"]);
  double others = double(j["wall_s"]) * double(j["cpus"].size()) - double(j["spinner_cpu_s"]) - ru;
  // The command ran on the measured CPUs only, from fork to reap (rusage counts in
  // microseconds; the snapshots around fork and reap are microseconds apart).
  const double resolution_s = 1e-4;
  EXPECT_GE(others, -resolution_s) << "the command's CPU time was not all taken from the spinner's CPUs: " << j.dump();
  EXPECT_NEAR(displaced, ru, unc + std::max(others, 0.0)) << j.dump();
  *ru_out = ru;
}

}  // namespace

// Always busy: the spinner gets (almost) nothing during the run.
TEST(Overhead, BusyWorkloadDisplacesItsCpuTime) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: --nice -20 needs root (CAP_SYS_NICE)";
  TempDir tmp;
  json j = measure(burn() + " 400", tmp);
  double ru = 0;
  expect_displacement_matches(j, &ru);
  EXPECT_GE(ru, 0.400) << "burn 400 burns 400 ms of its own CPU time";
}

// Busy 5 x 40 ms with sleeps between: most of the run is the spinner's, so the
// result rests on its calibrated rate (units -> seconds), not on the wall time.
TEST(Overhead, PartlyIdleWorkloadDisplacesItsCpuTime) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: --nice -20 needs root (CAP_SYS_NICE)";
  TempDir tmp;
  json j = measure("sh -c 'for i in 1 2 3 4 5; do " + burn() + " 40; sleep 0.1; done'", tmp);
  double ru = 0;
  expect_displacement_matches(j, &ru);
  ASSERT_GT(double(j["wall_s"]), 2 * ru) << "the workload was not mostly idle: " << j.dump();
  EXPECT_GE(ru, 0.200) << "five burns of 40 ms of their own CPU time";
}
