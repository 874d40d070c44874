#include "clock/tsc_verdict.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "os/node_info.h"

namespace cptrace {

namespace {

using Words = std::vector<std::string>;

Words words(const std::string& s) {
  Words w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

bool has(const Words& w, const std::string& x) { return std::find(w.begin(), w.end(), x) != w.end(); }

// The options of every `tsc=` on the command line: newer kernels also take a
// comma-separated list there.
Words tsc_options(const Words& cmdline) {
  Words out;
  for (const std::string& arg : cmdline) {
    if (arg.rfind("tsc=", 0) != 0) continue;
    std::istringstream in(arg.substr(4));
    for (std::string o; std::getline(in, o, ',');) out.push_back(o);
  }
  return out;
}

std::string clocksource_option(const Words& cmdline) {
  std::string v;
  for (const std::string& arg : cmdline)
    if (arg.rfind("clocksource=", 0) == 0) v = arg.substr(12);  // the last one wins, as in the kernel
  return v;
}

// The kernel's name for the TSC once calibrated, and before ("tsc-early").
bool is_tsc(const std::string& cs) { return cs == "tsc" || cs == "tsc-early"; }

// tsc=unstable and notsc both make the kernel call mark_tsc_unstable() at boot
// (arch/x86/kernel/tsc.c): it never registers the "tsc" clocksource then.
std::optional<std::string> cmdline_distrust(const Words& cmdline) {
  if (has(tsc_options(cmdline), "unstable"))
    return "tsc=unstable on the kernel command line: the kernel marked the TSC unstable at boot";
  if (has(cmdline, "notsc")) return "notsc on the kernel command line: the kernel marked the TSC unstable at boot";
  return std::nullopt;
}

// A TSC the kernel marked unstable is never current again, and on a tickless
// kernel (NO_HZ or high-resolution timers: every distribution kernel) it is
// dropped from available_clocksource, which lists only clocksources valid for
// high resolution; at boot it is not registered at all.
std::optional<std::string> sysfs_distrust(const TscKernelTexts& t, const Words& cmdline) {
  Words avail = words(t.available_clocksource);
  if (avail.empty() || is_tsc(t.current_clocksource)) return std::nullopt;
  if (std::any_of(avail.begin(), avail.end(), is_tsc)) return std::nullopt;
  std::string refused = clocksource_option(cmdline) == "tsc" ? ", despite clocksource=tsc on the command line" : "";
  return fmt::format(
      "the kernel does not offer the TSC as a clocksource (current {}, available: {}){}: it marked the TSC unstable "
      "(its watchdog or sync check) or never registered it",
      t.current_clocksource.empty() ? "unreadable" : t.current_clocksource, fmt::join(avail, " "), refused);
}

// Why the kernel's trust is worth less than it looks: with tsc=reliable, or the
// tsc_reliable flag a hypervisor sets, it neither watches the TSC nor checks it
// across CPUs at boot.
std::string unwatched_note(const Words& flags, const Words& cmdline) {
  bool param = has(tsc_options(cmdline), "reliable"), flag = has(flags, "tsc_reliable");
  if (!param && !flag) return "";
  return fmt::format("; not watched by the kernel ({}: no clocksource watchdog, no boot-time sync check)",
                     param && flag ? "tsc=reliable and the tsc_reliable flag"
                     : param       ? "tsc=reliable"
                                   : "the tsc_reliable flag");
}

std::string trusted_reason(const TscKernelTexts& t, const Words& flags, const Words& cmdline) {
  std::string why;
  if (is_tsc(t.current_clocksource)) {
    why = "current clocksource " + t.current_clocksource;
  } else {
    std::string cs = clocksource_option(cmdline);
    why = fmt::format("the kernel offers tsc (available: {}) but uses {}{}", t.available_clocksource,
                      t.current_clocksource.empty() ? "an unreadable clocksource" : t.current_clocksource,
                      cs.empty() ? "" : " (clocksource=" + cs + " on the command line)");
  }
  why += "; constant_tsc nonstop_tsc";
  if (has(flags, "tsc_known_freq")) why += " tsc_known_freq";
  return why + unwatched_note(flags, cmdline);
}

// The first "flags" line of /proc/cpuinfo, after its colon.
std::string read_cpu_flags() {
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);)
    if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 1);
  return "";
}

}  // namespace

const char* TscVerdict::name() const {
  switch (trust) {
    case TscTrust::Trusted:
      return "trusted";
    case TscTrust::Distrusted:
      return "distrusted";
    case TscTrust::Unknown:
      break;
  }
  return "unknown";
}

TscVerdict judge_tsc(const TscKernelTexts& t) {
  Words flags = words(t.cpu_flags), cmdline = words(t.cmdline);
  if (auto r = cmdline_distrust(cmdline)) return {TscTrust::Distrusted, *r};
  if (!flags.empty() && !has(flags, "tsc")) return {TscTrust::Distrusted, "the CPU has no TSC (no tsc flag)"};
  if (auto r = sysfs_distrust(t, cmdline)) return {TscTrust::Distrusted, *r};
  if (flags.empty())
    return {TscTrust::Unknown, "no CPU flags in /proc/cpuinfo: whether the TSC is invariant is unknown"};
  Words missing;
  for (const char* f : {"constant_tsc", "nonstop_tsc"})
    if (!has(flags, f)) missing.push_back(f);
  // The kernel still uses such a TSC, until it sees a frequency change or a deep
  // idle state stop it, and marks it unstable then.
  if (!missing.empty())
    return {TscTrust::Unknown,
            fmt::format("the CPU does not promise an invariant TSC (no {}): the kernel drops it at the first frequency "
                        "change or deep idle state it sees",
                        fmt::join(missing, ", no "))};
  // Without the list, a current clocksource other than tsc could be a choice
  // (clocksource=, a higher rating) or a verdict.
  if (t.available_clocksource.empty() && !is_tsc(t.current_clocksource))
    return {TscTrust::Unknown, t.current_clocksource.empty()
                                   ? "the clocksource lists in sysfs are unreadable: the kernel's verdict is unknown"
                                   : "available_clocksource is unreadable and the current clocksource is " +
                                         t.current_clocksource + ": the kernel's verdict is unknown"};
  return {TscTrust::Trusted, trusted_reason(t, flags, cmdline)};
}

TscKernelTexts read_tsc_kernel_texts() {
  const std::string dir = "/sys/devices/system/clocksource/clocksource0/";
  return {read_text_file(dir + "current_clocksource"), read_text_file(dir + "available_clocksource"),
          read_text_file("/proc/cmdline"), read_cpu_flags()};
}

}  // namespace cptrace
