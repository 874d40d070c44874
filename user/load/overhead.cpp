#include "load/overhead.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

#include "clock/clock_now.h"
#include "os/exec_argv.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {

using nlohmann::json;

namespace {

// One work unit: a dependent multiply-add chain (~4 us here), no memory traffic,
// so its speed does not depend on what the command does to the caches.
inline uint64_t work_unit(uint64_t x) {
  for (int i = 0; i < 2048; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

void pin_self(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0)
    throw std::runtime_error(fmt::format("--cpus: cannot run on CPU {}: {}", cpu, strerror(errno)));
}

int64_t thread_cpu_ns() { return clock_now_ns(CLOCK_THREAD_CPUTIME_ID); }

// A busy loop pinned to one CPU. Calibrates itself first, then drops to
// SCHED_IDLE and counts units. The calibrated rate is units per second of the
// spinner's own CPU time (median of 10 ms windows): preemption by other work
// during calibration, which a wall-clock rate would mistake for slowness,
// does not enter it.
struct alignas(64) Spinner {
  int cpu;
  double calibrate_s;
  std::atomic<uint64_t> units{0};
  std::atomic<bool> ready{false}, stop{false};
  double rate = 0, spread = 0;
  std::string error;
  std::thread th;
  clockid_t cpu_clock{};  // this thread's CPU-time clock, read by snap()

  void run() {
    pthread_getcpuclockid(pthread_self(), &cpu_clock);
    try {
      pin_self(cpu);
    } catch (const std::exception& e) {
      error = e.what();
      ready = true;
      return;
    }
    uint64_t x = uint64_t(cpu) + 1, n = 0;
    std::vector<double> rates;
    int64_t end = mono_ns() + int64_t(seconds_to_ns(calibrate_s));
    while (mono_ns() < end) {
      int64_t c0 = thread_cpu_ns(), w0 = mono_ns();
      uint64_t u0 = n;
      while (mono_ns() - w0 < 10000000) {
        x = work_unit(x);
        n++;
      }
      int64_t dc = thread_cpu_ns() - c0;
      if (dc >= 2000000) rates.push_back(double(n - u0) * 1e9 / double(dc));
    }
    if (!rates.empty()) {
      std::sort(rates.begin(), rates.end());
      rate = rates[rates.size() / 2];
      // Half the 10-90% spread: how much the speed of one unit itself varies here
      // (frequency, a busy SMT sibling on the host), the rate's own uncertainty.
      spread = (rates[rates.size() * 9 / 10] - rates[rates.size() / 10]) / 2 / rate;
    }
    sched_param p{};
    if (sched_setscheduler(0, SCHED_IDLE, &p) != 0) error = std::string("SCHED_IDLE: ") + strerror(errno);
    ready = true;
    while (!stop.load(std::memory_order_relaxed)) {
      x = work_unit(x);
      units.store(++n, std::memory_order_relaxed);
    }
    sink = x;
  }
  static inline volatile uint64_t sink;
};

struct Snapshot {
  int64_t t;
  std::vector<uint64_t> units;
  int64_t spinner_cpu_ns = 0;  // summed over the spinners
};

Snapshot snap(const std::vector<std::unique_ptr<Spinner>>& sp) {
  Snapshot s;
  int64_t a = mono_ns();
  for (auto& p : sp) {
    s.units.push_back(p->units.load(std::memory_order_relaxed));
    s.spinner_cpu_ns += clock_now_ns(p->cpu_clock);
  }
  s.t = (a + mono_ns()) / 2;
  return s;
}

// CPU-seconds lost per CPU between two snapshots.
std::vector<double> lost(const Snapshot& a, const Snapshot& b, const std::vector<double>& rate) {
  std::vector<double> v;
  for (size_t i = 0; i < rate.size(); ++i)
    v.push_back(ns_to_seconds(b.t - a.t) - double(b.units[i] - a.units[i]) / rate[i]);
  return v;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// irq, softirq, steal seconds of the given CPUs from /proc/stat.
std::array<double, 3> proc_stat(const std::vector<int>& cpus) {
  std::ifstream f("/proc/stat");
  std::array<double, 3> r{};
  double hz = double(sysconf(_SC_CLK_TCK));
  for (std::string line; std::getline(f, line);) {
    int cpu;
    unsigned long long v[8];
    if (sscanf(line.c_str(), "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) != 9)
      continue;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    r[0] += v[5] / hz, r[1] += v[6] / hz, r[2] += v[7] / hz;
  }
  return r;
}

std::vector<int> allowed_cpus() {
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  std::vector<int> v;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) v.push_back(c);
  return v;
}

bool g_nice_on_autogroup = false;

bool autogroups_enabled() {
  std::ifstream f("/proc/sys/kernel/sched_autogroup_enabled");
  int v = 0;
  return (f >> v) && v == 1;
}

// --nice with autogroups: CFS shares a CPU between sessions first, so a task's
// own nice only orders it within its session. The measurement (spinners and
// command) moves into a session of its own, whose autogroup gets the nice.
// Returns the measuring child's status in the parent, -1 in the child.
int enter_own_autogroup(int nice) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid > 0) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  if (setsid() < 0) throw std::runtime_error(std::string("--nice: setsid: ") + strerror(errno));
  std::ofstream ag("/proc/self/autogroup");
  ag << nice << std::flush;
  if (!ag)
    throw std::runtime_error(fmt::format("--nice {}: cannot set the autogroup's nice (needs CAP_SYS_NICE)", nice));
  g_nice_on_autogroup = true;
  return -1;
}

pid_t spawn(const OverheadOptions& o, const std::vector<int>& cpus) {
  cpu_set_t s, mine;
  CPU_ZERO(&s);
  for (int c : cpus) CPU_SET(c, &s);
  // The child is born on the measured CPUs: its first instructions (copy-on-write
  // faults before exec) are part of its rusage and must be part of the displacement.
  bool moved = sched_getaffinity(0, sizeof mine, &mine) == 0 && sched_setaffinity(0, sizeof s, &s) == 0;
  pid_t pid = fork();
  if (pid != 0 && moved) sched_setaffinity(0, sizeof mine, &mine);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid) return pid;
  sched_setaffinity(0, sizeof s, &s);
  if (o.nice && !g_nice_on_autogroup) setpriority(PRIO_PROCESS, 0, o.nice);
  ExecArgv(o.cmd).exec_or_exit(true, "cptrace overhead: ");
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');) {
    int a, b;
    char extra;
    if (sscanf(part.c_str(), "%d-%d%c", &a, &b, &extra) == 2 && a >= 0 && b >= a && b < CPU_SETSIZE) {
      for (int c = a; c <= b; ++c) v.push_back(c);
    } else if (sscanf(part.c_str(), "%d%c", &a, &extra) == 1 && a >= 0 && a < CPU_SETSIZE) {
      v.push_back(a);
    } else {
      throw std::runtime_error(fmt::format("--cpus {}: '{}' is not a CPU number or range", s, part));
    }
  }
  if (v.empty()) throw std::runtime_error(fmt::format("--cpus '{}': no CPU", s));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

double OverheadReport::unexplained_s() const {
  return displaced_s - (rusage_user_s + rusage_sys_s + irq_s + softirq_s);
}

bool OverheadReport::other_load() const { return unexplained_s() > uncertainty_s; }

json OverheadReport::to_json() const {
  return {{"cpus", cpus},
          {"rate_units_per_s", rate},
          {"wall_s", wall_s},
          {"displaced_cpu_s", displaced_s},
          {"displaced_per_cpu_s", displaced_cpu},
          {"uncertainty_s", uncertainty_s},
          {"spinner_cpu_s", spinner_cpu_s},
          {"rate_spread", rate_spread},
          {"background_before", background_before},
          {"background_after", background_after},
          {"rusage_user_s", rusage_user_s},
          {"rusage_sys_s", rusage_sys_s},
          {"irq_s", irq_s},
          {"softirq_s", softirq_s},
          {"steal_s", steal_s},
          {"unexplained_s", unexplained_s()},
          {"other_load", other_load()},
          {"status", status}};
}

OverheadReport measure_overhead(const OverheadOptions& o) {
  if (o.cmd.empty()) throw std::runtime_error("no command: cptrace overhead [options] -- CMD ARGS...");
  if (!(o.calibrate_s >= 0.1)) throw std::runtime_error(fmt::format("--calibrate {}: need >= 0.1 s", o.calibrate_s));
  if (!(o.baseline_s >= 0.05)) throw std::runtime_error(fmt::format("--baseline {}: need >= 0.05 s", o.baseline_s));
  OverheadReport r;
  r.cpus = o.cpus.empty() ? allowed_cpus() : parse_cpu_list(o.cpus);
  // Keep our own (mostly sleeping) thread off the measured CPUs when possible.
  std::vector<int> others;
  for (int c : allowed_cpus())
    if (std::find(r.cpus.begin(), r.cpus.end(), c) == r.cpus.end()) others.push_back(c);
  if (!others.empty()) pin_self(others[0]);

  std::vector<std::unique_ptr<Spinner>> sp;
  for (int c : r.cpus) {
    sp.push_back(std::make_unique<Spinner>());
    sp.back()->cpu = c;
    sp.back()->calibrate_s = o.calibrate_s;
  }
  for (auto& s : sp) s->th = std::thread([p = s.get()] { p->run(); });
  auto stop_all = [&] {
    for (auto& s : sp) s->stop = true;
    for (auto& s : sp) s->th.join();
  };
  for (auto& s : sp)
    while (!s->ready) usleep(10000);
  for (auto& s : sp) {
    if (!s->error.empty() || s->rate <= 0) {
      std::string e = s->error.empty() ? "calibration failed" : s->error;
      stop_all();
      throw std::runtime_error(e);
    }
    r.rate.push_back(s->rate);
    r.rate_spread.push_back(s->spread);
  }
  double ncpu = double(r.cpus.size());
  auto a0 = snap(sp);
  usleep(useconds_t(o.baseline_s * 1e6));
  auto a1 = snap(sp);
  r.background_before = sum(lost(a0, a1, r.rate)) / ns_to_seconds(a1.t - a0.t) / ncpu;

  auto ps0 = proc_stat(r.cpus);
  auto b0 = snap(sp);
  pid_t pid = spawn(o, r.cpus);
  int st = 0;
  rusage ru{};
  while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {
  }
  auto b1 = snap(sp);
  auto ps1 = proc_stat(r.cpus);

  usleep(useconds_t(o.baseline_s * 1e6));
  auto c1 = snap(sp);
  r.background_after = sum(lost(b1, c1, r.rate)) / ns_to_seconds(c1.t - b1.t) / ncpu;
  stop_all();

  r.wall_s = ns_to_seconds(b1.t - b0.t);
  r.displaced_cpu = lost(b0, b1, r.rate);
  r.displaced_s = sum(r.displaced_cpu);
  // The spinner's units converted with a rate known to +-spread: that much of
  // the spinner's share of the run is uncertain (the command's share is not).
  for (size_t i = 0; i < r.cpus.size(); ++i)
    r.uncertainty_s += double(b1.units[i] - b0.units[i]) / r.rate[i] * r.rate_spread[i];
  // The scheduler's account of the spinners' CPU time says what the units should
  // have said. When the spinners run in many short slices (a busy command), each
  // slice starts cold and the units fall behind the calibrated rate: the
  // conversion is off by at least that much, whatever the rate's spread.
  r.spinner_cpu_s = ns_to_seconds(double(b1.spinner_cpu_ns - b0.spinner_cpu_ns));
  double by_scheduler = r.wall_s * double(r.cpus.size()) - r.spinner_cpu_s;
  r.uncertainty_s = std::max(r.uncertainty_s, std::abs(r.displaced_s - by_scheduler));
  r.rusage_user_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
  r.rusage_sys_s = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  r.irq_s = ps1[0] - ps0[0], r.softirq_s = ps1[1] - ps0[1], r.steal_s = ps1[2] - ps0[2];
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

int run_overhead(const OverheadOptions& o) {
  // The command gets our terminal's Ctrl-C; we wait for it and still report.
  signal(SIGINT, SIG_IGN);
  bool child = false;
  if (o.nice && autogroups_enabled()) {
    int st = enter_own_autogroup(o.nice);
    if (st >= 0) return st;
    child = true;
  }
  OverheadReport r = measure_overhead(o);
  if (child) fflush(nullptr);
  if (o.json) {
    fmt::print("{}\n", r.to_json().dump(2));
    return r.status;
  }
  std::string cpus;
  for (int c : r.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  double ru = r.rusage_user_s + r.rusage_sys_s;
  std::string nice = !o.nice               ? ""
                     : g_nice_on_autogroup ? fmt::format(", own autogroup at nice {}", o.nice)
                                           : fmt::format(", nice {}", o.nice);
  say("CPUs {}, spinner {:.4g} units/s undisturbed (+-{:.1f}%)\n"
      "  command: exit {}, wall {:.3f} s{}\n"
      "  displaced CPU:          {:.4f} s +- {:.4f} s ({:.1f}% of {} CPU(s) over the run)\n"
      "  command rusage:         {:.4f} s  (user {:.4f}, sys {:.4f})\n"
      "  not charged to it:      {:+.4f} s  (interrupts, softirq, kernel threads, other processes)\n"
      "  activity without the command (spinner alone, before/after): {:.2f}% / {:.2f}% of the CPUs\n"
      "  /proc/stat on these CPUs during the run: irq {:.3f} s, softirq {:.3f} s, steal {:.3f} s",
      cpus, r.rate.empty() ? 0 : r.rate[0], r.rate_spread.empty() ? 0 : 100 * r.rate_spread[0], r.status, r.wall_s,
      nice, r.displaced_s, r.uncertainty_s, 100 * r.displaced_s / (r.wall_s * r.cpus.size()), r.cpus.size(), ru,
      r.rusage_user_s, r.rusage_sys_s, r.displaced_s - ru, 100 * r.background_before, 100 * r.background_after, r.irq_s,
      r.softirq_s, r.steal_s);
  if (r.other_load())
    fmt::print(stderr,
               "  OTHER LOAD PRESENT: {:.4f} s displaced beyond the command's rusage + irq + softirq (uncertainty "
               "{:.4f} s):\n"
               "  other work ran on these CPUs during the run ({}), so the displaced CPU is an upper bound\n",
               r.unexplained_s(), r.uncertainty_s,
               o.nice ? "--nice does not keep other sessions out while the command sleeps"
                      : "--nice -20 reduces, but does not remove, other sessions' share");
  return r.status;
}

}  // namespace cptrace
