#include "collect/stage_flush.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "os/say.h"

namespace cptrace {

StageFlusher::StageFlusher(bpf_program* prog, int stages_fd) : prog_fd_(bpf_program__fd(prog)), stages_fd_(stages_fd) {
  if (sched_getaffinity(0, sizeof allowed_, &allowed_) != 0) CPU_ZERO(&allowed_);
  if (!run_here())  // nothing is staged yet: a run that works empties nothing
    throw std::system_error(errno, std::generic_category(), "running the stage flush program (BPF_PROG_TEST_RUN)");
}

// On this thread's CPU, preemption disabled by the kernel for the run.
bool StageFlusher::run_here() {
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  return bpf_prog_test_run_opts(prog_fd_, &opts) == 0;
}

void StageFlusher::flush_each_cpu() {
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed_)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    // A refused run leaves the stage to fill or to leftovers(): late, not lost.
    if (sched_setaffinity(0, sizeof one, &one) == 0) run_here();
  }
  sched_setaffinity(0, sizeof allowed_, &allowed_);
}

std::vector<cp_singles_rec> StageFlusher::leftovers() {
  std::vector<cp_singles_rec> out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<cp_stage> st(ncpu);  // sizeof(cp_stage) is a multiple of 8, as the kernel pads per-CPU values
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(stages_fd_, &zero, st.data()) != 0) {
    // Counted as seen but never recorded: say so rather than lose them quietly.
    say("reading the staged events of each CPU failed ({}): up to {} events per CPU "
        "are missing from the trace",
        strerror(errno), CP_STAGE_MAX - 1);
    return out;
  }
  for (int c = 0; c < ncpu; ++c) {
    if (st[c].n == 0 || st[c].n > CP_STAGE_MAX) continue;
    cp_singles_rec r{};
    r.h = {CP_REC_SINGLES, uint16_t(c), 0, 0, st[c].n};
    memcpy(r.e, st[c].e, sizeof r.e);
    out.push_back(r);
  }
  return out;
}

}  // namespace cptrace
