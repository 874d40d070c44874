// The kernel's verdict on the TSC (clock/tsc_verdict.h), from the texts a
// machine of each kind shows: sysfs clocksource lists, /proc/cmdline, cpuinfo.
#include <gtest/gtest.h>

#include <string>

#include "clock/tsc_verdict.h"

namespace cptrace {
namespace {

// A bare-metal Intel server's flags, trimmed to what matters here.
const std::string kInvariantFlags =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall "
    "nx pdpe1gb rdtscp lm constant_tsc arch_perfmon nopl xtopology nonstop_tsc cpuid tsc_known_freq pni "
    "tsc_deadline_timer tsc_adjust";
const std::string kCmdline = "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/mapper/vg-root ro quiet splash";

TscKernelTexts normal_machine() { return {"tsc", "tsc hpet acpi_pm", kCmdline, kInvariantFlags}; }

bool mentions(const TscVerdict& v, const std::string& what) { return v.reason.find(what) != std::string::npos; }

TEST(TscVerdict, NormalTscMachineIsTrusted) {
  TscVerdict v = judge_tsc(normal_machine());
  EXPECT_EQ(v.trust, TscTrust::Trusted) << v.reason;
  EXPECT_STREQ(v.name(), "trusted");
  EXPECT_TRUE(mentions(v, "current clocksource tsc")) << v.reason;
  EXPECT_FALSE(mentions(v, "not watched")) << v.reason;
}

// tsc=unstable: the kernel marks the TSC unstable at boot and never registers
// it; the CPU flags stay as they were.
TEST(TscVerdict, TscUnstableOnTheCommandLineIsDistrusted) {
  TscKernelTexts t = {"hpet", "hpet acpi_pm", kCmdline + " tsc=unstable", kInvariantFlags};
  TscVerdict v = judge_tsc(t);
  EXPECT_EQ(v.trust, TscTrust::Distrusted);
  EXPECT_STREQ(v.name(), "distrusted");
  EXPECT_TRUE(mentions(v, "tsc=unstable")) << v.reason;
  // Whatever sysfs shows: the command line alone decides.
  t.current_clocksource = "tsc";
  t.available_clocksource = "tsc hpet";
  EXPECT_EQ(judge_tsc(t).trust, TscTrust::Distrusted);
  t.cmdline = kCmdline + " tsc=nowatchdog,unstable";  // the list form of newer kernels
  EXPECT_EQ(judge_tsc(t).trust, TscTrust::Distrusted);
  t.cmdline = kCmdline + " notsc";
  EXPECT_TRUE(mentions(judge_tsc(t), "notsc"));
}

// A KVM guest whose watchdog marked the TSC unstable: kvm-clock is current and
// the TSC, no longer valid for high resolution, is gone from the list.
TEST(TscVerdict, KvmClockVmWithoutTscAvailableIsDistrusted) {
  TscVerdict v = judge_tsc({"kvm-clock", "kvm-clock acpi_pm", kCmdline, kInvariantFlags + " hypervisor"});
  EXPECT_EQ(v.trust, TscTrust::Distrusted) << v.reason;
  EXPECT_TRUE(mentions(v, "does not offer the TSC")) << v.reason;
  EXPECT_TRUE(mentions(v, "current kvm-clock")) << v.reason;
  EXPECT_TRUE(mentions(v, "available: kvm-clock acpi_pm")) << v.reason;
}

// The same VM with the TSC still offered: kvm-clock won on its rating, which is
// a choice, not a verdict.
TEST(TscVerdict, KvmClockVmWithTscAvailableIsTrusted) {
  TscVerdict v = judge_tsc({"kvm-clock", "kvm-clock tsc acpi_pm", kCmdline, kInvariantFlags + " hypervisor"});
  EXPECT_EQ(v.trust, TscTrust::Trusted) << v.reason;
  EXPECT_TRUE(mentions(v, "uses kvm-clock")) << v.reason;
  v = judge_tsc({"hpet", "tsc hpet acpi_pm", kCmdline + " clocksource=hpet", kInvariantFlags});
  EXPECT_EQ(v.trust, TscTrust::Trusted) << v.reason;
  EXPECT_TRUE(mentions(v, "clocksource=hpet on the command line")) << v.reason;
}

TEST(TscVerdict, ClocksourceTscRefusedByTheKernelIsDistrusted) {
  TscVerdict v = judge_tsc({"hpet", "hpet acpi_pm", kCmdline + " clocksource=tsc", kInvariantFlags});
  EXPECT_EQ(v.trust, TscTrust::Distrusted);
  EXPECT_TRUE(mentions(v, "despite clocksource=tsc")) << v.reason;
}

// Flags the CPU does not show: no invariance promised is not yet a verdict of
// the kernel (it still uses the TSC); no TSC at all is.
TEST(TscVerdict, MissingFlags) {
  TscKernelTexts t = normal_machine();
  t.cpu_flags = "fpu tsc msr rdtscp constant_tsc";
  TscVerdict v = judge_tsc(t);
  EXPECT_EQ(v.trust, TscTrust::Unknown) << v.reason;
  EXPECT_TRUE(mentions(v, "no nonstop_tsc")) << v.reason;
  t.cpu_flags = "fpu tsc msr";
  EXPECT_TRUE(mentions(judge_tsc(t), "no constant_tsc, no nonstop_tsc")) << judge_tsc(t).reason;
  t.cpu_flags = "fpu msr";
  EXPECT_EQ(judge_tsc(t).trust, TscTrust::Distrusted);
  t.cpu_flags = "";  // cpuinfo unreadable
  EXPECT_EQ(judge_tsc(t).trust, TscTrust::Unknown);
}

TEST(TscVerdict, UnreadableSysfsIsUnknown) {
  TscKernelTexts t = normal_machine();
  t.current_clocksource = t.available_clocksource = "";
  EXPECT_EQ(judge_tsc(t).trust, TscTrust::Unknown);
  t.current_clocksource = "hpet";  // a choice or a verdict: the list would say
  TscVerdict v = judge_tsc(t);
  EXPECT_EQ(v.trust, TscTrust::Unknown);
  EXPECT_TRUE(mentions(v, "available_clocksource is unreadable")) << v.reason;
}

// tsc=reliable and a hypervisor's tsc_reliable flag switch the kernel's own
// checks off: trusted, and the reason says nobody watches it.
TEST(TscVerdict, ReliableMeansUnwatched) {
  TscKernelTexts t = normal_machine();
  t.cmdline += " tsc=reliable";
  TscVerdict v = judge_tsc(t);
  EXPECT_EQ(v.trust, TscTrust::Trusted);
  EXPECT_TRUE(mentions(v, "not watched by the kernel (tsc=reliable")) << v.reason;
  t = normal_machine();
  t.cpu_flags += " tsc_reliable";
  EXPECT_TRUE(mentions(judge_tsc(t), "the tsc_reliable flag")) << judge_tsc(t).reason;
}

}  // namespace
}  // namespace cptrace
