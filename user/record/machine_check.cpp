// `cptrace check`: see machine_check.h.
#include "record/machine_check.h"

#include <cpuid.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <bpf/bpf.h>

#include "probe/proc_registry.h"
#include "probe/kernel_features.h"
#include "probe/probe_selftest.h"
#include "probe/probe_site.h"
#include "probe/tracefs_uprobes.h"
#include "clock/tsc_skew.h"
#include "clock/clock_quantum.h"
#include "os/node_info.h"
#include "record/skew_turn.h"
#include "clock/ntp_state.h"
#include "clock/tsc_verdict.h"

namespace cptrace {

namespace {

// What `record` does to follow a tree, tried on ourselves: a tracefs uprobe
// event on our own cp_logTS, and a perf event of it scoped to this process.
std::string follow_problem() {
  try {
    TracefsUprobes t;
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    auto off = probe_site_file_offset(self, single_event_site(self));
    if (!off) return "no single-event site in " + self;
    int fd = t.open(t.add(self, *off), getpid());
    if (fd < 0) return std::string("perf_event_open on a tracefs uprobe event: ") + strerror(errno);
    close(fd);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

struct Checker {
  int failed = 0;
  void line(bool ok, bool required, const std::string& what, const std::string& detail) {
    fmt::print("{:<5} {:<34} {}\n", ok ? "ok" : required ? "FAIL" : "warn", what, detail);
    if (!ok && required) failed++;
  }
};

// Measured like the probe sites line: a child forked after its parent's optimized
// hit, once without libcptrace's repair (raw fork system call) and once with.
void report_fork_safety(Checker& c) {
  ForkSafety f = measure_fork_safety();
  if (!f.error.empty()) {
    c.line(false, false, "fork after a probe hit", f.error);
    return;
  }
  std::string problem = f.kernel_problem() ? std::string("yes: a child forked after an optimized hit died of ") +
                                                 strsignal(WTERMSIG(f.raw_fork_status))
                        : f.optimized ? "no: a child forked after an optimized hit survived"
                                      : "no: the site was not optimized, children inherit an int3";
  c.line(true, false, "kernel fork problem", problem);
  c.line(f.mitigation_holds(), false, "fork repair (libcptrace)",
         f.mitigation_holds() ? "a fork() child's probe site works"
                              : "a fork() child died (status " + std::to_string(f.fork_status) +
                                    "): recording programs that fork can kill their children");
}

// How NTP disciplines this clock now (adjtimex(modes = 0)): recording works
// either way; a slewed clock is what the clock-adjustment records and the
// denser correlation points around changes are for.
void report_clock_discipline(Checker& c) {
  try {
    NtpState s = read_ntp_state();
    c.line(true, false, "clock discipline (NTP)", s.describe());
  } catch (const std::exception& e) {
    c.line(false, false, "clock discipline (NTP)", e.what());
  }
  bool watch = kernel_features().syscall_tracepoints;
  c.line(watch, false, "clock-adjusting syscalls",
         watch ? "watched during recording (syscall tracepoints)"
               : "not watched (no syscall tracepoints): adjustments seen only at correlation points");
}

// One line: the widest interval over CPUs, and the bound it puts on |skew| in ns.
std::string describe_skew(const TscSkew& s) {
  double ns_per_tick = s.tsc_hz > 0 ? 1e9 / s.tsc_hz : 0;
  std::string taken = fmt::format("{:.1f} ms", s.elapsed_ms);
  if (s.reference_cpu < 0) return "not measured: this process may run on no online CPU (" + taken + ")";
  std::string out;
  if (auto w = s.widest())
    out = fmt::format("TSC_k - TSC_cpu{} within [{}, {}] ticks for all {} CPUs: |skew| <= {:.1f} ns", s.reference_cpu,
                      w->first, w->second, s.cpus.size() + 1, double(s.max_abs()) * ns_per_tick);
  else
    out = fmt::format(
        "not measured on CPU {} (not allowed here, or no answer in time); measured ones |skew| <= {:.1f} ns",
        fmt::join(s.unmeasured, ", "), double(s.max_abs()) * ns_per_tick);
  return out + " (" + taken + ")";
}

// Every bound rests on the TSC: the kernel's verdict on it (a TSC it marked
// unstable keeps its cpuinfo flags, so those alone prove nothing), and how far
// apart the CPUs' counters are, measured (docs/clock.md, "TSC trust").
void report_tsc_trust(Checker& c) {
  TscVerdict v = read_tsc_verdict();
  // Distrusted is a warning, not a failure: record checks the TSC itself.
  std::string checked = v.trust == TscTrust::Distrusted
                            ? "; record checks it itself (skew across CPUs at start, every --skew-period and at "
                              "stop; each clock segment's rate)"
                            : "";
  c.line(v.trust == TscTrust::Trusted, false, "TSC (kernel's verdict)",
         fmt::format("{}: {}{}", v.name(), v.reason, checked));
  TscSkew s = measure_tsc_skew_in_turn();
  c.line(s.complete(), false, "TSC skew across CPUs", describe_skew(s));
  // lib/batch.c makes the same test at load (CPUID 0x80000001 EDX bit 27).
  unsigned a = 0, b = 0, cx = 0, d = 0;
  bool rdtscp = __get_cpuid(0x80000001, &a, &b, &cx, &d) && (d & (1u << 27));
  c.line(rdtscp, false, "stamp CPU (rdtscp)",
         rdtscp ? "buffered stamps name their CPU: two of one CPU compare with no skew term"
                : "no rdtscp: every stamp carries the skew across CPUs (docs/clock.md)");
}

// What this kernel lets the BPF programs do; each missing feature degrades one
// thing (docs/kernels.md), never the whole recording.
void report_kernel_features(Checker& c) {
  const KernelFeatures& k = kernel_features();
  c.line(true, false, "kernel", "Linux " + k.release);
  c.line(k.preempt_kfunc, false, "per-CPU stage of cp_logTS",
         k.preempt_kfunc ? "bpf_preempt_disable kfunc present"
                         : "no bpf_preempt_disable kfunc (6.10+): one ring record per event, exact, slower");
  bool exits = k.exit_before_mm || k.syscall_tracepoints;
  c.line(exits, false, "thread-exit hand-over",
         k.exit_before_mm ? "sched_process_exit before exit_mm (6.16+): every ending"
         : k.syscall_tracepoints
             ? "at exit/exit_group and fatal signals (sched_process_exit runs after exit_mm before 6.16)"
             : "fatal signals only: no syscall tracepoints, no early sched_process_exit");
  c.line(k.bpf_loop, false, "channel handlers",
         k.bpf_loop ? "bpf_loop helper present" : "no bpf_loop (5.17+): handlers are refused");
  std::vector<std::string> absent;
  for (const char* tp :
       {"net_dev_start_xmit", "netif_receive_skb", "netif_rx", "netif_receive_skb_entry",
        "netif_receive_skb_list_entry", "napi_gro_receive_entry", "napi_gro_frags_entry", "sock_send_length",
        "sock_recv_length", "tcp_sendmsg_locked", "inet_sock_set_state", "softirq_entry", "sched_process_fork"})
    if (!kernel_has_tracepoint(tp)) absent.push_back(tp);
  c.line(absent.empty(), false, "network capture (--net)",
         absent.empty() ? "every tracepoint present"
                        : fmt::format("without {}: record --net says what is not captured (docs/kernels.md)",
                                      fmt::join(absent, ", ")));
  if (!k.forced_off.empty())
    c.line(false, false, "features turned off",
           "CPTRACE_DISABLE_FEATURES: " + fmt::format("{}", fmt::join(k.forced_off, ",")));
}

// cp_logTS's two paths on this machine (lib/single_route.c): the buffer, its
// default, and the site a program gets with CPTRACE_SINGLE=site.
void report_single_paths(Checker& c, const UprobeCost& u, bool optimized) {
  double site = optimized ? u.nop5_record_ns : u.int3_record_ns;
  c.line(true, false, "cp_logTS paths",
         fmt::format("buffer (default) {:.1f} ns/event recorded; site (CPTRACE_SINGLE=site: each event at once) "
                     "{:.0f} ns/event, {:.0f}x",
                     u.buffered_record_ns, site, u.buffered_record_ns > 0 ? site / u.buffered_record_ns : 0.0));
}

}  // namespace

int run_check() {
  namespace fs = std::filesystem;
  Checker c;
  NodeInfo n = read_node_info();
  bool root = geteuid() == 0;
  c.line(root, true, "root", root ? "running as root" : "recording needs root (sudo cptrace record ...)");
  c.line(fs::exists("/sys/kernel/btf/vmlinux"), true, "kernel BTF", "/sys/kernel/btf/vmlinux");
  c.line(fs::exists("/sys/bus/event_source/devices/uprobe/type"), true, "uprobes",
         "/sys/bus/event_source/devices/uprobe");
  if (root) {
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cp_check", 0, 0, 1 << 16, nullptr);
    c.line(fd >= 0, true, "BPF ring buffer", fd >= 0 ? "created one" : std::string("bpf(): ") + strerror(errno));
    if (fd >= 0) close(fd);
    report_kernel_features(c);
    UprobeCost u = measure_uprobe_cost();
    if (!u.error.empty()) {
      c.line(false, true, "uprobe attach", u.error);
    } else {
      // Optimized: the kernel rewrote the nop into a call, and a hit is a
      // jump, not a trap (several times cheaper than the int3 path).
      bool optimized = u.nop_rewritten && u.nop5_empty_ns * 3 < u.int3_empty_ns;
      std::string costs = fmt::format(
          "{:.0f} ns/hit recorded, {:.0f} ns empty (int3 path: {:.0f} ns recorded, {:.0f} empty; no probe: {:.1f} ns)",
          u.nop5_record_ns, u.nop5_empty_ns, u.int3_record_ns, u.int3_empty_ns, u.no_probe_ns);
      c.line(optimized, false, "probe sites",
             probe_site_nop_form() +
                 (optimized ? ", optimized by this kernel: " + costs
                            : ", not optimized: int3 path, every hit traps (x86-64 Linux 6.18+ optimizes nop5 "
                              "sites): " +
                                  costs));
      report_single_paths(c, u, optimized);
    }
    report_fork_safety(c);
    std::string f = follow_problem();
    c.line(f.empty(), false, "follow children (-p, -- CMD)",
           f.empty() ? "tracefs uprobe event opened on this process" : f + " (record --no-inherit still works)");
  } else {
    c.line(false, true, "BPF ring buffer / uprobe attach", "skipped: needs root");
  }
  c.line(n.invariant_tsc(), true, "invariant TSC",
         n.invariant_tsc() ? "constant_tsc nonstop_tsc" : "TSC not invariant: cross-node bounds would not hold");
  report_tsc_trust(c);
  c.line(n.clocksource == "tsc", false, "clocksource",
         n.clocksource + (n.clocksource == "tsc" ? "" : " (not tsc: kernel timestamps convert less tightly)"));
  // The step every kernel-stamp bound carries (clock/clock_quantum.h).
  uint64_t q = measure_clock_quantum(CLOCK_MONOTONIC, n.clocksource);
  c.line(q <= 10, false, "clock reading step",
         fmt::format("CLOCK_MONOTONIC reads in steps of {} ns{}", q,
                     q <= 10 ? "" : ": every kernel-stamp bound is that much wider"));
  report_clock_discipline(c);
  fmt::print("{}\n", c.failed ? "recording cannot work here" : "recording can work here");
  return c.failed ? 1 : 0;
}

}  // namespace cptrace
