// The kernel matrix: cptrace on the kernels of Debian's 6.1 and 6.12 packages
// (cloud and PREEMPT_RT flavours), beside the host kernel the rest of the suite
// runs on. Each test boots one
// kernel (fetched by tools/guest-kernels.sh, `make guest-kernels`, part of `make
// test`) under QEMU with an initramfs built from this tree
// (tools/guest-initramfs.sh), whose /init (tests/kernels/guest-init.sh) runs
// `cptrace check` and exact-count recordings and prints one result line per
// check. QEMU runs in TCG (no nested KVM on CI machines): slow, and its TSC is not
// invariant, so the guest asserts what holds there (programs load, exact counts,
// traced programs unharmed, and kernel stamps on the acpi_pm and hpet clocksources
// inside their bounds) and timing stays on the host.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "test_util.h"

using namespace testutil;
namespace fs = std::filesystem;

namespace {

// What /init runs, in its order; each must print exactly one result line.
const std::vector<std::string> kChecks = {"check",         "single",     "single-site",    "batch",
                                          "fork",          "spawn",      "net-udp",        "net-tcp",
                                          "clock-acpi_pm", "clock-hpet", "preempt-single", "preempt-batch"};
// The PREEMPT_RT kernels' shorter list (given to /init as cptrace.checks=...):
// what preemption inside the BPF programs can break (loading, exact counts on
// all paths, handlers with several threads on one CPU), not what the cloud
// kernel of the same version already covers (fork, spawn, network).
const std::vector<std::string> kRtChecks = {"check", "single",         "single-site",
                                            "batch", "preempt-single", "preempt-batch"};
// The whole guest (boot, checks, power off) takes 3-6 minutes under TCG on a
// loaded 2-CPU machine; a guest still running after this is hung.
constexpr int kGuestTimeoutS = 1200;

struct GuestResult {
  std::string verdict, details;  // "PASS" or "FAIL"; the rest of the line
};

struct GuestRun {
  int status = -1;  // of `timeout qemu ...`: 124 when the guest hung
  double seconds = 0;  // QEMU's wall time, boot to power-off
  std::string console;  // the serial console, \r removed
  std::string boot;  // the CPTRACE-GUEST-BOOT line's rest: release and uptime
  bool ended = false;  // /init got to its last line
  std::map<std::string, GuestResult> results;
};

fs::path kernel_dir(const std::string& series) { return build_dir() / "kernels" / series; }

// The text after `marker` on each line holding it. Anywhere in the line: the
// firmware's terminal escapes share a line with /init's first output.
std::vector<std::string> lines_after(const std::string& text, const std::string& marker) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (auto at = line.find(marker); at != std::string::npos) v.push_back(line.substr(at + marker.size()));
  return v;
}

void parse_console(GuestRun& g) {
  std::erase(g.console, '\r');
  for (const std::string& rest : lines_after(g.console, "CPTRACE-GUEST ")) {
    std::istringstream in(rest);
    std::string name, verdict, details;
    in >> name >> verdict;
    std::getline(in >> std::ws, details);
    g.results[name] = {verdict, details};
  }
  auto boot = lines_after(g.console, "CPTRACE-GUEST-BOOT ");
  if (!boot.empty()) g.boot = boot.front();
  g.ended = !lines_after(g.console, "CPTRACE-GUEST-END").empty();
}

std::string tail_lines(const std::string& text, size_t n) {
  size_t at = text.size();
  for (size_t i = 0; i <= n && at != std::string::npos && at > 0; ++i) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

// Boots `series`'s kernel on `initramfs`: 2 vCPUs (per-CPU rings, migrations),
// `-cpu max` (rdtsc and every feature TCG emulates), the console on the serial
// port into a file, no reboot (a panic ends QEMU: panic=-1 reboots at once).
// thread=single: the vCPUs take turns on one host thread. With a thread per
// vCPU, QEMU 7.2 let a guest CPU run a kernel int3 that text patching had
// already removed (6.12: "Oops: int3" in finish_task_switch while a perf event
// was opened), a panic no real CPU produces.
// `append`: more of the kernel's command line.
GuestRun boot(const std::string& series, const fs::path& initramfs, const TempDir& tmp, const std::string& append) {
  std::string console = tmp / "console.log";
  std::string cmd = fmt::format(
      "timeout -k 10 {} qemu-system-x86_64 -nodefaults -nographic -monitor none -no-reboot -accel tcg,thread=single "
      "-cpu max -smp 2 -m 1536 -kernel {} -initrd {} -append 'console=ttyS0 panic=-1 quiet{}' "
      "-serial file:{} </dev/null",
      kGuestTimeoutS, (kernel_dir(series) / "vmlinuz").string(), initramfs.string(), append, console);
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(cmd, tmp);
  GuestRun g;
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g.status = r.status;
  g.console = read_file(console);
  if (!r.err.empty()) g.console += "\n[qemu stderr] " + r.err;
  parse_console(g);
  return g;
}

// Every check's line, one per line, and what is wrong with the run: FAIL lines,
// missing lines, a guest that hung or never got to its end.
std::string problems(const GuestRun& g, const std::vector<std::string>& checks) {
  std::string p;
  for (const std::string& c : checks) {
    auto it = g.results.find(c);
    if (it == g.results.end())
      p += fmt::format("  {}: no result line (the guest never got there)\n", c);
    else if (it->second.verdict != "PASS")
      p += fmt::format("  {}: {} {}\n", c, it->second.verdict, it->second.details);
  }
  if (g.status == 124) p += fmt::format("  the guest was still running after {} s\n", kGuestTimeoutS);
  if (!g.ended) p += "  /init did not reach its end (CPTRACE-GUEST-END)\n";
  return p;
}

// Builds the initramfs and boots `series` with `checks` (all of /init's when
// they are kChecks). No assertion here: it runs on a thread of its own, while
// the suite's other guests run (see KernelMatrix below); `setup` says what
// kept it from booting.
GuestRun guest_run(const std::string& series, const std::vector<std::string>& checks, std::string& setup) {
  fs::path kdir = kernel_dir(series);
  // Not a skip: `make test` fetches the kernels first (make guest-kernels).
  if (!fs::exists(kdir / "vmlinuz")) {
    setup = fmt::format("no kernel at {}: run `make guest-kernels` (as root)", kdir.string());
    return {};
  }
  TempDir tmp;
  fs::path initramfs = tmp.path / "initramfs.cpio";
  RunResult b = run(fmt::format("bash {} {} {} {}", (source_dir() / "tools" / "guest-initramfs.sh").string(),
                                build_dir().string(), kdir.string(), initramfs.string()),
                    tmp);
  if (b.status != 0) {
    setup = "guest-initramfs.sh failed:\n" + b.err;
    return {};
  }
  std::string append;
  if (checks != kChecks) {
    append = " cptrace.checks=";
    for (const std::string& c : checks) append += c + (&c == &checks.back() ? "" : ",");
  }
  return boot(series, initramfs, tmp, append);
}

struct Guest {
  std::vector<std::string> checks;
  std::string setup;  // what kept it from booting
  GuestRun run;
};

// Each guest is one QEMU thread (thread=single), so the suite boots as many at
// once as the machine has CPUs, each from its own thread, and each test waits
// for its own: the suite takes about half as long on 2 CPUs as one after the
// other. Only the guests of the tests that are going to run are booted.
class KernelMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static const std::map<std::string, std::pair<std::string, std::vector<std::string>>> kSeries = {
        {"Debian6_1", {"6.1", kChecks}},
        {"Debian6_12", {"6.12", kChecks}},
        {"Debian6_1_PreemptRt", {"6.1-rt", kRtChecks}},
        {"Debian6_12_PreemptRt", {"6.12-rt", kRtChecks}}};
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    std::vector<std::string> todo;
    for (int i = 0; i < suite->total_test_count(); ++i)
      if (suite->GetTestInfo(i)->should_run() && kSeries.count(suite->GetTestInfo(i)->name()))
        todo.push_back(kSeries.at(suite->GetTestInfo(i)->name()).first);
    for (const auto& [name, v] : kSeries) guests()[v.first].checks = v.second;
    auto next = std::make_shared<std::atomic<size_t>>(0);
    unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), todo.size()));
    for (unsigned w = 0; w < n; ++w)
      workers().emplace_back([todo, next] {
        for (size_t i; (i = (*next)++) < todo.size();) {
          Guest& g = guests().at(todo[i]);
          GuestRun r = guest_run(todo[i], g.checks, g.setup);
          std::lock_guard<std::mutex> l(mu());
          g.run = std::move(r);
          done().insert(todo[i]);
          cv().notify_all();
        }
      });
  }
  static void TearDownTestSuite() {
    for (std::thread& t : workers()) t.join();
    workers().clear();
  }
  static std::map<std::string, Guest>& guests() {
    static std::map<std::string, Guest> m;
    return m;
  }
  static std::vector<std::thread>& workers() {
    static std::vector<std::thread> v;
    return v;
  }
  static std::set<std::string>& done() {
    static std::set<std::string> s;
    return s;
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& cv() {
    static std::condition_variable c;
    return c;
  }

  // Waits for `series`'s guest and asserts on it; returns the run.
  static GuestRun run_matrix(const std::string& series) {
    std::unique_lock<std::mutex> l(mu());
    cv().wait(l, [&] { return done().count(series) > 0; });
    const Guest& guest = guests().at(series);
    const GuestRun& g = guest.run;
    EXPECT_EQ(guest.setup, "");
    if (!guest.setup.empty()) return g;
    std::string package = read_file(kernel_dir(series) / "package");
    package.erase(package.find_last_not_of('\n') + 1);
    printf("      %s (%s): %.0f s in QEMU, boot %s\n", series.c_str(), package.c_str(), g.seconds, g.boot.c_str());
    for (const std::string& c : guest.checks)
      if (g.results.count(c))
        printf("      %-8s %s %s\n", c.c_str(), g.results.at(c).verdict.c_str(), g.results.at(c).details.c_str());
    ::testing::Test::RecordProperty("kernel_package", package);
    ::testing::Test::RecordProperty("qemu_seconds", int(g.seconds + 0.5));
    std::string p = problems(g, guest.checks);
    EXPECT_TRUE(p.empty()) << "kernel " << series << " (" << package << "), guest " << g.boot << ":\n"
                           << p << "console tail:\n"
                           << tail_lines(g.console, 60);
    return g;
  }

  // A PREEMPT_RT kernel: the preemption checks must have run on a kernel that
  // says it is PREEMPT_RT (a cloud kernel in its place would pass them without
  // ever preempting a BPF program).
  static void run_rt_matrix(const std::string& series) {
    GuestRun g = run_matrix(series);
    for (const std::string c : {"preempt-single", "preempt-batch"}) {
      if (g.results.count(c)) {
        EXPECT_NE(g.results[c].details.find("PREEMPT_RT:"), std::string::npos)
            << c << " ran on a kernel that is not PREEMPT_RT: " << g.results[c].details;
      }
    }
  }
};

}  // namespace

// Debian's 6.1 under TCG distrusts its TSC (not invariant on QEMU's CPU model,
// dropped from the clocksource lists): the recordings there are the ones on a
// distrusted TSC, recorded by default, exact, with cptrace's own check stated.
TEST_F(KernelMatrix, Debian6_1) {
  GuestRun g = run_matrix("6.1");
  for (const std::string c : {"single", "batch"}) {
    if (!g.results.count(c)) continue;  // run_matrix said so already
    EXPECT_NE(g.results[c].details.find("tsc distrusted"), std::string::npos)
        << c << ": the guest's TSC was not the distrusted one this check is for: " << g.results[c].details;
  }
}

TEST_F(KernelMatrix, Debian6_12) { run_matrix("6.12"); }

// Several threads on one CPU preempting each other inside the BPF programs
// (tests/kernels/guest-init.sh, check_preempt): handlers and counters exact.
TEST_F(KernelMatrix, Debian6_1_PreemptRt) { run_rt_matrix("6.1-rt"); }

TEST_F(KernelMatrix, Debian6_12_PreemptRt) { run_rt_matrix("6.12-rt"); }
