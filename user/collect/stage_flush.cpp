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

#include "cptrace_probe_site.h"
#include "os/say.h"

// The flush probe's site, in this binary: a site like every other (lib/probe_site.h).
asm(R"(
  .include "probe_site.h"
  .text
  CP_PROBE_SITE cp_recorder_stage_flush
)");
extern "C" void cp_recorder_stage_flush();

namespace cptrace {

StageFlusher::StageFlusher(bpf_program* prog, int stages_fd) : stages_fd_(stages_fd) {
  if (sched_getaffinity(0, sizeof allowed_, &allowed_) != 0) CPU_ZERO(&allowed_);
  LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "cp_recorder_stage_flush");
  link_ = bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", CP_SITE_NOP_OFFSET, &uo);
  if (!link_)
    throw std::system_error(errno, std::generic_category(), "attaching the stage flush probe to the recorder itself");
}

StageFlusher::~StageFlusher() {
  if (link_) bpf_link__destroy(link_);
}

void StageFlusher::flush_each_cpu() {
  if (!link_) return;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed_)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) cp_recorder_stage_flush();
  }
  sched_setaffinity(0, sizeof allowed_, &allowed_);
}

std::vector<cp_singles_rec> StageFlusher::leftovers() {
  if (link_) bpf_link__destroy(link_);
  link_ = nullptr;
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
