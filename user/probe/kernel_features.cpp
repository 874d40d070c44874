#include "probe/kernel_features.h"

#include <sys/mount.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cptrace {

namespace {

bool has_func(const btf* b, const char* name) { return btf__find_by_name_kind(b, name, BTF_KIND_FUNC) > 0; }

// Arguments of a tp_btf tracepoint, from its btf_trace_<name> typedef (a
// pointer to a prototype whose first parameter is the context): -1 if absent.
int tracepoint_args(const btf* b, const std::string& tp) {
  int id = btf__find_by_name_kind(b, ("btf_trace_" + tp).c_str(), BTF_KIND_TYPEDEF);
  if (id <= 0) return -1;
  const btf_type* t = btf__type_by_id(b, btf__type_by_id(b, id)->type);  // the pointer
  if (!t || !btf_is_ptr(t)) return -1;
  t = btf__type_by_id(b, t->type);
  if (!t || !btf_is_func_proto(t)) return -1;
  return btf_vlen(t) - 1;
}

// libbpf attaches classic tracepoints through tracefs: mount it where it is
// usually found when nothing is mounted (a minimal VM or container).
bool syscall_tracepoint_exists() {
  for (const char* d : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
    if (access(fmt::format("{}/events/syscalls/sys_enter_exit_group", d).c_str(), F_OK) == 0) return true;
  if (access("/sys/kernel/tracing/events", F_OK) == 0) return false;  // mounted, no syscall events
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return false;
  return access("/sys/kernel/tracing/events/syscalls/sys_enter_exit_group", F_OK) == 0;
}

std::vector<std::string> split_commas(const char* s) {
  std::vector<std::string> out;
  std::istringstream in(s ? s : "");
  for (std::string w; std::getline(in, w, ',');)
    if (!w.empty()) out.push_back(w);
  return out;
}

}  // namespace

KernelFeatures probe_kernel_features() {
  KernelFeatures f;
  utsname u{};
  if (uname(&u) == 0) f.release = u.release;
  if (btf* b = btf__load_vmlinux_btf(); libbpf_get_error(b) == 0 && b) {
    f.btf = true;
    f.preempt_kfunc = has_func(b, "bpf_preempt_disable") && has_func(b, "bpf_preempt_enable");
    f.exit_before_mm = tracepoint_args(b, "sched_process_exit") >= 2;
    f.optimized_uprobe = has_func(b, "__x64_sys_uprobe");
    btf__free(b);
  }
  f.bpf_loop = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, nullptr) == 1;
  f.syscall_tracepoints = syscall_tracepoint_exists();
  f.forced_off = split_commas(getenv("CPTRACE_DISABLE_FEATURES"));
  const std::map<std::string, bool*> knobs = {{"preempt_kfunc", &f.preempt_kfunc},
                                              {"exit_before_mm", &f.exit_before_mm},
                                              {"syscall_tracepoints", &f.syscall_tracepoints},
                                              {"bpf_loop", &f.bpf_loop}};
  for (const auto& name : f.forced_off) {
    auto it = knobs.find(name);
    if (it == knobs.end())
      throw std::runtime_error(
          fmt::format("CPTRACE_DISABLE_FEATURES: unknown feature '{}' (known: "
                      "preempt_kfunc, exit_before_mm, syscall_tracepoints, bpf_loop)",
                      name));
    *it->second = false;
  }
  return f;
}

bool kernel_has_tracepoint(const std::string& name) {
  static btf* vmlinux = [] {
    btf* b = btf__load_vmlinux_btf();
    return libbpf_get_error(b) ? nullptr : b;
  }();
  return vmlinux && tracepoint_args(vmlinux, name) >= 0;
}

const KernelFeatures& kernel_features() {
  static const KernelFeatures f = probe_kernel_features();
  return f;
}

std::vector<std::string> degraded_features(const KernelFeatures& f) {
  std::vector<std::string> out;
  if (!f.optimized_uprobe)
    out.push_back(
        "no optimized uprobes (x86-64 Linux 6.18+): every probe hit traps (int3), several "
        "µs each (docs/kernels.md); cp_logTS buffers its events unless CPTRACE_SINGLE=site");
  if (!f.preempt_kfunc)
    out.push_back(
        "no bpf_preempt_disable kfunc (Linux 6.10+): single events go to the ring one record "
        "each instead of staged per CPU (exact, about twice the kernel time per event)");
  if (!f.exit_before_mm)
    out.push_back(
        "sched_process_exit runs after exit_mm (before Linux 6.16): thread buffers left at exit "
        "are handed over at exit/exit_group and at fatal signals only");
  if (!f.syscall_tracepoints)
    out.push_back(
        "no syscall tracepoints (CONFIG_FTRACE_SYSCALLS or tracefs): thread buffers left at "
        "exit/exit_group are recovered only where sched_process_exit can read them");
  if (!f.bpf_loop)
    out.push_back(
        "no bpf_loop helper (Linux 5.17+): channel handlers (--config, handler commands) are "
        "refused; every event is recorded");
  if (!f.forced_off.empty())
    out.push_back(fmt::format("({} turned off by CPTRACE_DISABLE_FEATURES)", fmt::join(f.forced_off, ", ")));
  return out;
}

std::string feature_needed_by(const std::string& program) {
  static const std::map<std::string, std::string> needs = {
      {"cp_tbuf_exit", "tp_btf/sched_process_exit running before exit_mm (Linux 6.16+)"},
      {"cp_follow_exit", "tp_btf/sched_process_exit (BTF-typed tracepoints, Linux 5.5+)"},
      {"cp_follow_fork", "tp_btf/sched_process_fork (BTF-typed tracepoints, Linux 5.5+)"},
      {"cp_tbuf_exit_sys", "syscall tracepoints (CONFIG_FTRACE_SYSCALLS)"},
      {"cp_tbuf_exit_grou", "syscall tracepoints (CONFIG_FTRACE_SYSCALLS)"},
      {"cp_tbuf_exit_group", "syscall tracepoints (CONFIG_FTRACE_SYSCALLS)"},
      {"cp_tbuf_exit_sig", "the signal_deliver tracepoint and CO-RE (task->signal)"},
      {"cp_stage_flush", "the bpf_preempt_disable kfunc (Linux 6.10+)"},
      {"cp_batch_submit", "bpf_loop (Linux 5.17+) when channel handlers are in use, BPF cookies (5.15+)"},
  };
  auto it = needs.find(program);
  return it == needs.end() ? "" : it->second;
}

}  // namespace cptrace
