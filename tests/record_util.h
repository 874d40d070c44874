// Recording a workload in a test: the `cptrace record` command line, the
// workload program, and knowing when a recorder started in the background has
// attached (events from then on are recorded).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace testutil {

// tests/workload: threads emitting events on channels (tests/workloads/).
inline std::string workload() { return (build_dir() / "tests" / "workload").string(); }

// `cptrace record --no-progress -o OUT`, then `rest`: more options, and what to
// record ("-- COMMAND", "-p PID", "--lib SO"). --no-progress because tests read
// stderr, which the progress line would fill.
inline std::string record_cmd(const std::string& out, const std::string& rest = "") {
  return cptrace_bin() + " record --no-progress -o " + out + (rest.empty() ? "" : " " + rest);
}

// Whether the recorder `p` says on stderr within timeout_s that it attached;
// a failure carries its stderr. Use as ASSERT_TRUE(attached(rec)).
inline ::testing::AssertionResult attached(const Proc& p, double timeout_s = 30) {
  if (p.wait_for("attached", timeout_s, true)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "recorder not attached within " << timeout_s
                                       << " s; its stderr: " << read_file(p.err_path);
}

}  // namespace testutil
