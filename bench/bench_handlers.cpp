// Per-event cost of each channel handler, attached: the real cp_logTS and
// cp_batch_submit programs on a nop5 site in this process, with one handler
// installed for the channel the loop logs on. The empty program on the same
// site is the floor of the uprobe path; `null` shows how close a handler that
// keeps nothing gets to it. Prints figures; never passes or fails.
//
//   bench_handlers [CALLS]     (root)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cptrace_probe_site.h"

#include "cptrace.skel.h"
#include "cptrace_records.h"
#include "probe/kernel_features.h"
#include "probe/probe_attach.h"

// A probe site made by the library's macro (lib/probe_site.h).
asm(R"(
  .include "probe_site.h"
  .text
  CP_PROBE_SITE bench_handler_site
)");
extern "C" void bench_handler_site(uint64_t, uint64_t);

namespace {

constexpr uint64_t kChannel = 42;

struct Setup {
  const char* name;
  bool handlers;  // false: handlers never enabled (the plain recording path)
  cp_handler_rule rule;
  bool empty_prog = false;
};

enum class Path { Single, Batch };

// ns per event, or < 0 on error.
double measure(const Setup& s, Path path, int calls) {
  cptrace_bpf* skel = cptrace_bpf::open();
  if (!skel) return -1;
  skel->rodata->filter_tgid = getpid();
  int ncpu = libbpf_num_possible_cpus();
  bpf_map__set_max_entries(skel->maps.rings, ncpu);
  cptrace::configure_for_kernel(skel, false, false);
  cptrace::StagePrograms sp = cptrace::stage_programs(skel, cptrace::kernel_features().preempt_kfunc);
  double ns = -1;
  std::vector<int> fds;
  bpf_link* link = nullptr;
  if (cptrace_bpf::load(skel)) goto out;
  for (int cpu = 0; cpu < ncpu; ++cpu) {  // big enough for every record of a run
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "bench_ring", 0, 0, 64u << 20, nullptr);
    __u32 k = cpu;
    if (fd < 0 || bpf_map_update_elem(bpf_map__fd(skel->maps.rings), &k, &fd, BPF_ANY)) goto out;
    fds.push_back(fd);
  }
  if (s.handlers) {
    cp_handler h{};
    h.cur = s.rule;
    h.prev.gen = 0;
    uint64_t key = kChannel;
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.handlers), &key, &h, BPF_ANY)) goto out;
    skel->bss->handlers_in_use = 1;
  }
  {
    bpf_program* prog = s.empty_prog ? skel->progs.cp_empty : path == Path::Single ? sp.logTS : sp.batch_submit;
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "bench_handler_site");
    link = bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", CP_SITE_NOP_OFFSET, &uo);  // its nop
    if (!link) goto out;
    if (path == Path::Single) {
      for (int i = 0; i < 100; ++i) bench_handler_site(kChannel, i);  // the kernel optimizes on first hits
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) bench_handler_site(kChannel, i);
      ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls;
    } else {
      std::vector<cp_batch_entry> e(CP_BATCH_MAX);
      int batches = std::max(calls / CP_BATCH_MAX, 10);
      uint64_t tuple = 0;
      auto fill = [&] {
        for (auto& x : e) x = {__rdtsc(), kChannel, tuple++};
      };
      fill();
      for (int i = 0; i < 5; ++i) bench_handler_site(uint64_t(e.data()), CP_BATCH_MAX);
      double total = 0;
      for (int b = 0; b < batches; ++b) {
        fill();  // outside the timed part: the library's share is measured by bench_logts
        auto t0 = std::chrono::steady_clock::now();
        bench_handler_site(uint64_t(e.data()), CP_BATCH_MAX);
        total += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      }
      ns = total / (double(batches) * CP_BATCH_MAX);
    }
  }
out:
  if (link) bpf_link__destroy(link);
  for (int fd : fds) close(fd);
  cptrace_bpf::destroy(skel);
  return ns;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 200000;
  auto rule = [](uint32_t kind, uint64_t p1 = 0, uint64_t p2 = 0) { return cp_handler_rule{kind, 0, 1, p1, p2}; };
  const Setup setups[] = {
      {"empty BPF program (floor)", false, {}, true},
      {"no handlers (plain record)", false, {}},
      {"id", true, rule(CP_H_ID)},
      {"downsample 10", true, rule(CP_H_DOWNSAMPLE, 10)},
      {"xoy 1 10", true, rule(CP_H_XOY, 1, 10)},
      {"firstlast", true, rule(CP_H_FIRSTLAST)},
      {"counter 1ms", true, rule(CP_H_COUNTER, 1000000, 2000000)},
      {"null", true, rule(CP_H_NULL)},
  };
  const int reps = 5;
  printf("per-event cost with the handler attached, median of %d runs (%d events each):\n", reps, calls);
  printf("  %-28s %14s %14s\n", "handler", "cp_logTS ns", "batch ns");
  for (const auto& s : setups) {
    std::vector<double> single, batch;
    for (int r = 0; r < reps; ++r) {
      single.push_back(measure(s, Path::Single, calls));
      batch.push_back(measure(s, Path::Batch, calls));
    }
    double ms = median(single), mb = median(batch);
    if (ms < 0 || mb < 0) {
      fprintf(stderr, "bench_handlers: %s: BPF setup failed (%s); run as root\n", s.name, strerror(errno));
      return 1;
    }
    printf("  %-28s %14.1f %14.2f\n", s.name, ms, mb);
  }
  printf("  (batch: one cp_batch_submit hit per %d events, the program's time divided by %d)\n", CP_BATCH_MAX,
         CP_BATCH_MAX);
  return 0;
}
