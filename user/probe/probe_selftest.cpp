#include "probe/probe_selftest.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "cptrace.h"
#include "cptrace.skel.h"
#include "cptrace_records.h"
#include "cptrace_probe_site.h"
#include "os/fatal_signals.h"
#include "probe/bpf_load_log.h"
#include "probe/probe_attach.h"
#include "probe/per_cpu_rings.h"

// Probe sites in this binary: two made by the macro of every real site
// (lib/probe_site.h, found through -Wa,-Ilib; the uprobe goes on their nop, at
// +CP_SITE_NOP_OFFSET), and one that starts with an instruction the kernel
// cannot emulate and must single-step (push, jmp, call and nop are emulated, so
// they would hide the trap cost).
asm(R"(
  .include "probe_site.h"
  .text
  CP_PROBE_SITE cp_selftest_nop5
  CP_PROBE_SITE cp_selftest_nop5b
  .p2align 4
  .globl cp_selftest_plain
  .type cp_selftest_plain,@function
cp_selftest_plain:
  lea (%rdi), %rax
  ret
  .size cp_selftest_plain, .-cp_selftest_plain
)");
extern "C" void cp_selftest_nop5(uint64_t, uint64_t);
extern "C" void cp_selftest_nop5b(uint64_t, uint64_t);
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

// cp_logTS's program in the variant this kernel loads.
bpf_program* logts_program(cptrace_bpf* s) { return stage_programs(s, kernel_features().preempt_kfunc).logTS; }

// A uprobe on `sym` + `offset` of this binary, for this process.
bpf_link* attach_here(bpf_program* prog, const char* sym, size_t offset) {
  LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = sym);
  return bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", offset, &uo);
}

// The file of the object that holds libcptrace's code here: this binary where
// it is linked in (the recorder), else the shared library it loaded (a bench).
std::string libcptrace_object() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cp_logTS_batch), &info) || !info.dli_fname || !info.dli_fname[0])
    return "/proc/self/exe";
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&time_calls), &self) && self.dli_fbase == info.dli_fbase)
    return "/proc/self/exe";  // dli_fname is then argv[0], maybe relative
  return info.dli_fname;
}

// The buffered path of the libcptrace this binary uses (cp_logTS's default,
// lib/single_route.c) with the batch program on its submit site: ns per
// event, the submit hit shared by CP_BATCH_MAX events.
double buffered_path(cptrace_bpf* s, int calls, std::string& err) {
  LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = CP_COOKIE_BATCH_TSC, .func_name = "cp_batch_submit");
  bpf_program* prog = stage_programs(s, kernel_features().preempt_kfunc).batch_submit;
  const std::string object = libcptrace_object();
  bpf_link* l = bpf_program__attach_uprobe_opts(prog, getpid(), object.c_str(), CP_SITE_NOP_OFFSET, &uo);
  if (!l) {
    err = "attaching a uprobe to cp_batch_submit in " + object + ": " + strerror(errno);
    return 0;
  }
  double ns = time_calls(cp_logTS_batch, calls);
  cp_flush();
  bpf_link__destroy(l);
  return ns;
}

// Where the uprobe of a site of ours goes (its nop); the plain site has none.
size_t site_offset(const char* sym) { return strcmp(sym, "cp_selftest_plain") ? CP_SITE_NOP_OFFSET : 0; }

// *rewritten: whether the kernel rewrote the site's first byte under the probe
// into a call (the optimized path), seen while the probe is attached.
double with_probe(bpf_program* prog, const char* sym, Fn fn, int calls, std::string& err, bool* rewritten = nullptr) {
  bpf_link* l = attach_here(prog, sym, site_offset(sym));
  if (!l) {
    err = std::string("attaching a uprobe to ") + sym + ": " + strerror(errno);
    return 0;
  }
  double ns = time_calls(fn, calls);
  if (rewritten) *rewritten = reinterpret_cast<const volatile uint8_t*>(fn)[site_offset(sym)] == 0xe8;
  bpf_link__destroy(l);
  return ns;
}

// cp_logTS on one nop5 site and the empty program on another, attached together;
// chunks of calls alternate between them (which goes first alternating too), so
// the ratio of the summed times compares the two programs under the same host.
double interleaved_ratio(cptrace_bpf* s, int calls, std::string& err) {
  bpf_link* rec = attach_here(logts_program(s), "cp_selftest_nop5", CP_SITE_NOP_OFFSET);
  bpf_link* empty = rec ? attach_here(s->progs.cp_empty, "cp_selftest_nop5b", CP_SITE_NOP_OFFSET) : nullptr;
  double ratio = 0;
  if (!rec || !empty) {
    err = std::string("attaching the interleaved uprobes: ") + strerror(errno);
  } else {
    constexpr int kChunk = 500;
    double t_rec = 0, t_empty = 0;
    time_calls(cp_selftest_nop5, 100), time_calls(cp_selftest_nop5b, 100);  // both optimized first
    for (int done = 0, k = 0; done < calls; done += kChunk, ++k) {
      if (k % 2) t_rec += time_calls(cp_selftest_nop5, kChunk);
      t_empty += time_calls(cp_selftest_nop5b, kChunk);
      if (k % 2 == 0) t_rec += time_calls(cp_selftest_nop5, kChunk);
    }
    ratio = t_rec / t_empty;
  }
  if (empty) bpf_link__destroy(empty);
  if (rec) bpf_link__destroy(rec);
  return ratio;
}

}  // namespace

namespace {

// The child calls the site once and reports through its exit status.
int child_status(bool raw) {
  pid_t pid = raw ? pid_t(syscall(SYS_fork)) : fork();
  if (pid == 0) {
    default_fatal_signals();  // dying here is what this measures, not a crash to report
    cp_selftest_nop5(2, 0);
    syscall(SYS_exit_group, 0);  // nothing of the parent's (atexit, stdio) runs twice
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

}  // namespace

bool ForkSafety::kernel_problem() const { return raw_fork_status > 0 && WIFSIGNALED(raw_fork_status); }
bool ForkSafety::mitigation_holds() const {
  return fork_status >= 0 && WIFEXITED(fork_status) && WEXITSTATUS(fork_status) == 0;
}

ForkSafety measure_fork_safety() {
  ForkSafety f;
  cptrace_bpf* s = cptrace_bpf::open();
  if (!s) {
    f.error = std::string("opening the BPF object: ") + strerror(errno);
    return f;
  }
  // The empty program alone: it runs on every kernel, whatever else the object needs.
  bpf_program* p;
  bpf_object__for_each_program(p, s->obj) bpf_program__set_autoload(p, p == s->progs.cp_empty);
  BpfLoadLog log;
  if (int err = cptrace_bpf::load(s)) {
    f.error = explain_load_failure(err, log.text(), "loading the BPF programs");
    cptrace_bpf::destroy(s);
    return f;
  }
  bpf_link* l = attach_here(s->progs.cp_empty, "cp_selftest_nop5", CP_SITE_NOP_OFFSET);
  if (!l) {
    f.error = std::string("attaching a uprobe to cp_selftest_nop5: ") + strerror(errno);
  } else {
    for (int i = 0; i < 100; ++i) cp_selftest_nop5(1, i);
    // Optimized: the kernel rewrote the nop into a call to its trampoline.
    const auto* site = reinterpret_cast<const volatile uint8_t*>(&cp_selftest_nop5) + CP_SITE_NOP_OFFSET;
    f.optimized = *site == 0xe8;
    f.raw_fork_status = child_status(true);
    f.fork_status = child_status(false);
    bpf_link__destroy(l);
  }
  cptrace_bpf::destroy(s);
  return f;
}

UprobeCost measure_uprobe_cost(int calls) {
  UprobeCost c;
  c.no_probe_ns = time_calls(cp_selftest_nop5, calls);
  cptrace_bpf* s = cptrace_bpf::open();
  if (!s) {
    c.error = std::string("opening the BPF object: ") + strerror(errno);
    return c;
  }
  s->rodata->filter_tgid = getpid();
  // Nobody drains these rings: a wakeup forced past the usual threshold would
  // be paid by every record after it (a kernel irq_work each, ~3 us here) and
  // measure that instead of the program. A recorder's drain keeps rings below it.
  s->rodata->wakeup_bytes = ~0ull;
  bpf_map__set_max_entries(s->maps.rings, libbpf_num_possible_cpus());
  configure_for_kernel(s, false, false);
  BpfLoadLog log;
  if (int err = cptrace_bpf::load(s)) {
    c.error = explain_load_failure(err, log.text(), "loading the BPF programs");
    cptrace_bpf::destroy(s);
    return c;
  }
  // One small ring per CPU so the recording program really writes records.
  std::vector<int> fds;
  try {
    fds = PendingRings(8u << 20, "cp_selftest", "a BPF ring buffer").install(bpf_map__fd(s->maps.rings));
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  if (c.error.empty()) {
    c.nop5_empty_ns =
        with_probe(s->progs.cp_empty, "cp_selftest_nop5", cp_selftest_nop5, calls, c.error, &c.nop_rewritten);
    c.nop5_record_ns = with_probe(logts_program(s), "cp_selftest_nop5", cp_selftest_nop5, calls, c.error);
    c.interleaved_ratio = interleaved_ratio(s, calls, c.error);
    c.buffered_record_ns = buffered_path(s, calls * 10, c.error);
    c.int3_empty_ns =
        with_probe(s->progs.cp_empty, "cp_selftest_plain", cp_selftest_plain, std::max(calls / 10, 100), c.error);
    c.int3_record_ns =
        with_probe(logts_program(s), "cp_selftest_plain", cp_selftest_plain, std::max(calls / 10, 100), c.error);
  }
  for (int fd : fds) close(fd);
  cptrace_bpf::destroy(s);
  return c;
}

}  // namespace cptrace
