// Measures what a uprobe hit costs on this kernel, on probe sites inside the
// cptrace binary itself: the nop5 of a site made like every probe site (the
// optimized path) and a site that starts with another instruction (the int3 +
// single-step path). Used by `cptrace check`
// and the benchmarks.
#pragma once
#include <string>

namespace cptrace {

struct UprobeCost {
  double nop5_empty_ns = 0;  // empty BPF program on a nop5 site
  double nop5_record_ns = 0;  // the real cp_logTS program (ring record) on a nop5 site
  double int3_empty_ns = 0;  // empty BPF program on a non-nop5 site
  double int3_record_ns = 0;  // cp_logTS's program there: the single path before 6.18
  double no_probe_ns = 0;  // the same call with nothing attached
  // cp_logTS's default path: an event into the thread's buffer, the batch
  // program recording each CP_BATCH_MAX at its submit site (per event).
  double buffered_record_ns = 0;
  // cp_logTS over the empty program with both attached at once (two nop5 sites)
  // and their calls alternating in short chunks: host speed drifting during the
  // run moves both sides alike (0 when not measured).
  double interleaved_ratio = 0;
  // The kernel rewrote the site's nop into a call under the probe: it
  // optimizes this nop form (include/cptrace_probe_site.h).
  bool nop_rewritten = false;
  std::string error;  // non-empty if the measurement could not run
};

UprobeCost measure_uprobe_cost(int calls = 20000);

// Whether a forked child survives a probe site its parent hit with a uprobe
// attached (Linux 6.18+ rewrites the site into a call to a trampoline page that
// fork() does not copy), measured on this binary's nop5 site.
struct ForkSafety {
  bool optimized = false;  // the parent's site became a call after its hits
  int raw_fork_status = 0;  // wait status of a child forked by syscall(SYS_fork): no repair
  int fork_status = 0;  // wait status of a child forked by fork(): libcptrace's repair
  std::string error;  // non-empty if the measurement could not run
  bool kernel_problem() const;  // the raw child died of a signal
  bool mitigation_holds() const;  // the fork() child ended with status 0
};

ForkSafety measure_fork_safety();

}  // namespace cptrace
