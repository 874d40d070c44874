// The kernel's verdict on the TSC, read from what it exposes: the clocksource
// lists in sysfs, the boot command line and the CPU flags. The cpuinfo flags
// alone say what the CPU promises; a TSC the kernel marked unstable (tsc=unstable,
// its clocksource watchdog, a failed boot-time sync check) keeps those flags, but
// is no longer the current clocksource and, on a tickless kernel, is dropped from
// available_clocksource (docs/clock.md, "TSC trust").
#pragma once
#include <string>

namespace cptrace {

// The texts the verdict rests on, as read ("" when unreadable).
struct TscKernelTexts {
  std::string current_clocksource;  // .../clocksource0/current_clocksource
  std::string available_clocksource;  // .../clocksource0/available_clocksource
  std::string cmdline;  // /proc/cmdline
  std::string cpu_flags;  // the first "flags" line of /proc/cpuinfo, after the colon
};

enum class TscTrust { Trusted, Distrusted, Unknown };

struct TscVerdict {
  TscTrust trust = TscTrust::Unknown;
  std::string reason;  // what the texts said, in words a user can check
  const char* name() const;  // "trusted", "distrusted", "unknown"
};

// Pure: the verdict the texts give.
TscVerdict judge_tsc(const TscKernelTexts& t);

// The texts of this machine.
TscKernelTexts read_tsc_kernel_texts();

inline TscVerdict read_tsc_verdict() { return judge_tsc(read_tsc_kernel_texts()); }

}  // namespace cptrace
