// Empties the per-CPU stages of single events (include/cptrace_records.h,
// CP_REC_SINGLES). A stage is handed to its ring when it holds CP_STAGE_MAX
// events; at a low event rate the rest would wait there indefinitely. So at
// every flush the drain thread runs a probe of its own (cp_stage_flush) on each
// CPU in turn, which hands that CPU's stage over; and after the probes are
// detached, what is left is read from the map itself.
#pragma once
#include <sched.h>

#include <vector>

#include "cptrace_records.h"

struct bpf_program;
struct bpf_link;

namespace cptrace {

class StageFlusher {
 public:
  // Attaches `prog` to this process's own probe site (pid-scoped: no other
  // process triggers it). Throws std::runtime_error when it cannot.
  StageFlusher(bpf_program* prog, int stages_fd);
  ~StageFlusher();
  StageFlusher(const StageFlusher&) = delete;
  StageFlusher& operator=(const StageFlusher&) = delete;

  // Runs the probe on every CPU this thread may run on (its affinity is
  // restored after). A CPU it may not run on keeps its stage until it fills
  // or until leftovers().
  void flush_each_cpu();
  // Detaches the flush probe and returns the events still staged, one record
  // per CPU that has any. Call once the event probes are detached.
  std::vector<cp_singles_rec> leftovers();

 private:
  bpf_link* link_ = nullptr;
  int stages_fd_;
  cpu_set_t allowed_;
};

}  // namespace cptrace
