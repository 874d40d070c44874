// `cptrace overhead -- CMD`: what CPU a command really takes, by displacement
// (Woodside, Courtois & Schramm): a busy loop on each measured CPU counts "work
// units"; calibrated, it does `rate` units per second of CPU; beside the command it
// runs at SCHED_IDLE (it only gets cycles nobody else wants), so every second it
// loses is a second the command, or interrupt/softirq/kernel-thread work done on
// those CPUs, took:
//
//   displaced CPU = sum over CPUs of ( run wall time - units done during the run / rate )
//
// Unlike the command's rusage this includes interrupt and softirq time (this
// kernel has no IRQ_TIME_ACCOUNTING: an interrupt is charged to whoever it
// interrupted) and work the kernel does for the command in other contexts. It
// also includes anything else that ran on those CPUs. The spinner measures that
// activity alone just before and just after the command and reports it; it is
// not subtracted: a group holding only a SCHED_IDLE task is preempted by every
// wakeup elsewhere, so that activity is larger than what the same processes
// take beside a running command. --nice N (e.g. -20) gives the command and the
// spinners a session, hence an autogroup, of their own at that nice: the command
// then wins its CPUs against other sessions while it is runnable. It does NOT
// keep other sessions out: while the command sleeps the group holds only the
// SCHED_IDLE spinners, which yield to any runnable task, so another session's
// busy work runs then and is counted as displaced. The report therefore flags
// `other_load` when the displaced CPU exceeds what the command can account for
// (its rusage, irq and softirq) by more than the uncertainty.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct OverheadOptions {
  std::vector<std::string> cmd;
  std::string cpus;  // "0-1,3" (default: every CPU this process may use)
  double calibrate_s = 1.0;  // spinner alone: units per second of its own CPU time (median of 10 ms windows)
  double baseline_s = 0.5;  // background measured before and after the command
  int nice = 0;  // niceness of the command's session (see above: not a guarantee)
  bool json = false;
};

struct OverheadReport {
  std::vector<int> cpus;
  std::vector<double> rate;  // work units per second, per CPU, undisturbed
  std::vector<double> rate_spread;  // relative uncertainty of each rate (half its 10-90% spread)
  double wall_s = 0;  // command: fork to reap
  double displaced_s = 0;  // CPU-seconds the spinners lost during the run
  std::vector<double> displaced_cpu;  // ... per CPU
  double uncertainty_s = 0;  // +- on displaced_s from the rates' spread
  double spinner_cpu_s = 0;  // CPU time the spinner threads were given during the run
  double background_before = 0, background_after = 0;  // fraction of the CPUs lost without the command
  double rusage_user_s = 0, rusage_sys_s = 0;  // the command and its waited-for children
  double irq_s = 0, softirq_s = 0, steal_s = 0;  // /proc/stat on the measured CPUs over the run
  int status = 0;  // exit code, or 128 + signal
  // Displaced CPU the command's rusage, irq and softirq do not account for.
  double unexplained_s() const;
  // unexplained_s() beyond the uncertainty: something else (another session's
  // work, or kernel threads) took CPU during the run, and displaced_s is an
  // upper bound of the command's cost rather than its measure.
  bool other_load() const;
  nlohmann::json to_json() const;
};

// "0-2,5" -> {0,1,2,5}; throws naming the flag on bad syntax.
std::vector<int> parse_cpu_list(const std::string& s);
OverheadReport measure_overhead(const OverheadOptions& o);
int run_overhead(const OverheadOptions& o);

}  // namespace cptrace
