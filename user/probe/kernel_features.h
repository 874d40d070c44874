// What the running kernel offers the BPF programs, probed once at start (BTF
// lookups of kfuncs, syscalls and tracepoint prototypes; libbpf's helper and
// program-type probes; tracefs). The loader loads only what the kernel can
// run, and `cptrace check` and `record` print one line per degraded feature.
// docs/kernels.md has the table: feature, minimum kernel, what happens below.
#pragma once
#include <string>
#include <vector>

namespace cptrace {

struct KernelFeatures {
  std::string release;  // uname -r
  bool btf = false;  // /sys/kernel/btf/vmlinux readable
  bool preempt_kfunc = false;  // bpf_preempt_disable/enable (6.10): per-CPU stage of single events
  bool exit_before_mm = false;  // sched_process_exit with group_dead (6.16): runs before exit_mm
  bool syscall_tracepoints = false;  // tracefs syscalls/sys_enter_exit (CONFIG_FTRACE_SYSCALLS)
  bool bpf_loop = false;  // bpf_loop helper (5.17): channel handlers on the batch path
  bool optimized_uprobe = false;  // uprobe syscall (x86-64, 6.18): nop5 sites jump, not trap
  std::vector<std::string> forced_off;  // CPTRACE_DISABLE_FEATURES (tests of the fallbacks)
};

// Probes the running kernel. Features named in the comma-separated environment
// variable CPTRACE_DISABLE_FEATURES (preempt_kfunc, exit_before_mm,
// syscall_tracepoints, bpf_loop) are reported absent: the test suite runs the
// fallbacks of older kernels on this one that way.
KernelFeatures probe_kernel_features();

// The same probe, cached for the life of the process.
const KernelFeatures& kernel_features();

// Whether the kernel has the BTF-typed tracepoint `name` (its btf_trace_<name>
// typedef), for programs of section tp_btf/<name>.
bool kernel_has_tracepoint(const std::string& name);

// One line per feature the kernel lacks: what degrades, and how.
std::vector<std::string> degraded_features(const KernelFeatures& f);

// The feature a program of bpf/cptrace.bpf.c or bpf/netcap.bpf.c needs beyond
// BTF, uprobes and ring buffers ("" when nothing more), for error messages.
std::string feature_needed_by(const std::string& program);

}  // namespace cptrace
