// The paths cptrace takes on older kernels, run on this one: features are
// turned off with CPTRACE_DISABLE_FEATURES (user/probe/kernel_features.h), and
// the recording, exit and following tests must hold exactly as they do with
// every feature. The kernel matrix (test_kernel_matrix.cpp) runs them on the
// real older kernels; this runs the whole of those suites on the host's.
#include <gtest/gtest.h>

#include <regex>

#include "probe/bpf_load_log.h"
#include "record_util.h"
#include "test_util.h"

using namespace testutil;

namespace {

// The suites of this binary that record single events, batches, thread exits
// and process trees, in a child with `features` off.
RunResult run_suites_without(const std::string& features, const TempDir& tmp) {
  return run("CPTRACE_DISABLE_FEATURES=" + features + " " + (build_dir() / "cptrace_tests").string() +
                 " --gtest_filter='Record.*:ExitPaths.*:Follow.*:ForkSafety.*'",
             tmp);
}

int passed_count(const std::string& out) {
  std::smatch m;
  static const std::regex passed(R"(\[  PASSED  \] (\d+) test)");
  return std::regex_search(out, m, passed) ? std::stoi(m[1]) : 0;
}

}  // namespace

// 6.10 to 6.15: staged singles, but sched_process_exit after exit_mm.
// Before 6.10: no preempt kfunc either.
TEST(KernelFallbacks, RecordingExitAndFollowSuitesHoldOnOlderKernelPaths) {
  TempDir tmp;
  RunResult r = run_suites_without("preempt_kfunc,exit_before_mm", tmp);
  EXPECT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
  EXPECT_GE(passed_count(r.out), 20) << "too few tests ran:\n" << r.out;
  EXPECT_EQ(r.out.find("[  SKIPPED ]"), std::string::npos) << r.out;
}

// What record says about a kernel without the kfunc, and that the unstaged
// single path is exact.
TEST(KernelFallbacks, UnstagedSinglePathIsExactAndSaysSo) {
  TempDir tmp;
  RunResult r = run("CPTRACE_DISABLE_FEATURES=preempt_kfunc " + cptrace_bin() + " record -o " + (tmp / "t") +
                        " -- env CPTRACE_SINGLE=site " + workload() + " --threads 2 --events 50000",
                    tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("one record each instead of staged per CPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("turned off by CPTRACE_DISABLE_FEATURES"), std::string::npos) << r.err;
  // 100000 events and the two channel closes.
  EXPECT_NE(r.err.find("100002 events recorded, 0 dropped, 0 filtered, 100002 seen"), std::string::npos) << r.err;
}

// The unstaged single path (before 6.10) records the same call-time stamps:
// every event inside its caller's rdtsc bracket, plain and simulated clock.
TEST(KernelFallbacks, UnstagedSinglePathStampsAtTheCall) {
  TempDir tmp;
  RunResult r = run("CPTRACE_DISABLE_FEATURES=preempt_kfunc " + (build_dir() / "cptrace_tests").string() +
                        " --gtest_filter='Record.SingleEventsStampedInsideTheirCallBracket:"
                        "Record.SimulatedClockTransformsSingleStampsLikeBatchOnes'",
                    tmp);
  EXPECT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
  EXPECT_EQ(passed_count(r.out), 2) << r.out;
  EXPECT_EQ(r.out.find("[  SKIPPED ]"), std::string::npos) << r.out;
}

TEST(KernelFallbacks, UnknownFeatureNameIsRefused) {
  TempDir tmp;
  RunResult r = run("CPTRACE_DISABLE_FEATURES=preempt_kfnuc " + cptrace_bin() + " check", tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown feature 'preempt_kfnuc'"), std::string::npos) << r.err << r.out;
}

// A verifier rejection as libbpf reports it (the log of Debian's 6.12 kernel
// refusing the two-argument sched_process_exit program): named as what it is,
// not as a privilege problem (these tests run as root).
TEST(KernelFallbacks, VerifierRejectionNamesProgramReasonAndFeature) {
  const std::string log =
      "libbpf: prog 'cp_tbuf_exit': BPF program load failed: Permission denied\n"
      "libbpf: prog 'cp_tbuf_exit': -- BEGIN PROG LOAD LOG --\n"
      "func 'sched_process_exit' doesn't have 2-th argument\n"
      "invalid bpf_context access off=8 size=8\n"
      "processed 3 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'cp_tbuf_exit': failed to load: -13\n"
      "libbpf: failed to load object 'cptrace_bpf'\n";
  std::string msg = cptrace::explain_load_failure(-13, log, "loading the BPF programs");
  EXPECT_NE(msg.find("refused BPF program cp_tbuf_exit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("doesn't have 2-th argument / invalid bpf_context access off=8 size=8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("before exit_mm (Linux 6.16+)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Linux "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("needs root"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("Permission denied"), std::string::npos) << msg;
}
