#include "probe/probe_selftest.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "cptrace.skel.h"

// Two probe sites in this binary: `nop5; ret` like lib/cp_stubs.S, and one that
// starts with an instruction the kernel cannot emulate and must single-step
// (push, jmp, call and nop are emulated, so they would hide the trap cost).
asm(R"(
  .text
  .globl cp_selftest_nop5
  .type cp_selftest_nop5,@function
cp_selftest_nop5:
  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00
  ret
  .size cp_selftest_nop5, .-cp_selftest_nop5
  .globl cp_selftest_plain
  .type cp_selftest_plain,@function
cp_selftest_plain:
  lea (%rdi), %rax
  ret
  .size cp_selftest_plain, .-cp_selftest_plain
)");
extern "C" void cp_selftest_nop5(uint64_t, uint64_t);
extern "C" void cp_selftest_plain(uint64_t, uint64_t);

namespace cptrace {

namespace {

using Fn = void (*)(uint64_t, uint64_t);

double time_calls(Fn fn, int calls) {
  // Warm-up: the kernel optimizes a nop5 uprobe on its first hits.
  for (int i = 0; i < 100; ++i) fn(1, i);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn(1, i);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
}

double with_probe(bpf_program* prog, const char* sym, Fn fn, int calls, std::string& err) {
  LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = sym);
  bpf_link* l = bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", 0, &uo);
  if (!l) {
    err = std::string("attaching a uprobe to ") + sym + ": " + strerror(errno);
    return 0;
  }
  double ns = time_calls(fn, calls);
  bpf_link__destroy(l);
  return ns;
}

}  // namespace

UprobeCost measure_uprobe_cost(int calls) {
  UprobeCost c;
  c.no_probe_ns = time_calls(cp_selftest_nop5, calls);
  cptrace_bpf* s = cptrace_bpf::open();
  if (!s) {
    c.error = std::string("opening the BPF object: ") + strerror(errno);
    return c;
  }
  s->rodata->filter_tgid = getpid();
  bpf_map__set_max_entries(s->maps.rings, libbpf_num_possible_cpus());
  if (int err = cptrace_bpf::load(s)) {
    c.error = std::string("loading BPF programs: ") + strerror(-err);
    cptrace_bpf::destroy(s);
    return c;
  }
  // One small ring per CPU so the recording program really writes records.
  std::vector<int> fds;
  for (int cpu = 0; cpu < libbpf_num_possible_cpus(); ++cpu) {
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cp_selftest", 0, 0, 8u << 20, nullptr);
    __u32 k = cpu;
    if (fd < 0 || bpf_map_update_elem(bpf_map__fd(s->maps.rings), &k, &fd, BPF_ANY)) {
      c.error = std::string("creating a BPF ring buffer: ") + strerror(errno);
      break;
    }
    fds.push_back(fd);
  }
  if (c.error.empty()) {
    c.nop5_empty_ns = with_probe(s->progs.cp_empty, "cp_selftest_nop5", cp_selftest_nop5, calls, c.error);
    c.nop5_record_ns = with_probe(s->progs.cp_logTS, "cp_selftest_nop5", cp_selftest_nop5, calls, c.error);
    c.int3_empty_ns = with_probe(s->progs.cp_empty, "cp_selftest_plain", cp_selftest_plain,
                                 std::max(calls / 10, 100), c.error);
  }
  for (int fd : fds) close(fd);
  cptrace_bpf::destroy(s);
  return c;
}

}  // namespace cptrace
