// Empties the per-CPU stages of single events (include/cptrace_records.h,
// CP_REC_SINGLES). A stage is handed to its ring when it holds CP_STAGE_MAX
// events; at a low event rate the rest would wait there indefinitely. So at
// every flush the drain thread runs a program of its own (cp_stage_flush) on
// each CPU in turn, which hands that CPU's stage over; and after the probes are
// detached, what is left is read from the map itself.
//
// The program is run, not attached: BPF_PROG_TEST_RUN runs a raw tracepoint
// program on the calling thread's CPU with preemption disabled, as a probe hit
// would, and nothing is left to detach at the stop (a uprobe's detach waits out
// a kernel grace period under a mutex every detach shares: link_release.h).
// Not with BPF_F_TEST_RUN_ON_CPU: that runs it in an interrupt on another CPU,
// where it could cut into a probe's half-written stage.
#pragma once
#include <sched.h>

#include <vector>

#include "cptrace_records.h"

struct bpf_program;

namespace cptrace {

class StageFlusher {
 public:
  // `prog`: the loaded cp_stage_flush program (a raw tracepoint program). Runs
  // it once; throws std::system_error when the kernel refuses.
  StageFlusher(bpf_program* prog, int stages_fd);
  StageFlusher(const StageFlusher&) = delete;
  StageFlusher& operator=(const StageFlusher&) = delete;

  // Runs the program on every CPU this thread may run on (its affinity is
  // restored after). A CPU it may not run on keeps its stage until it fills
  // or until leftovers().
  void flush_each_cpu();
  // The events still staged, one record per CPU that has any. Call once the
  // event probes are detached.
  std::vector<cp_singles_rec> leftovers();

 private:
  bool run_here();

  int prog_fd_;
  int stages_fd_;
  cpu_set_t allowed_;
};

}  // namespace cptrace
