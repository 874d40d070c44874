// Helpers shared by the integration tests: where the built programs are, running
// commands, temporary directories, and the loud skip when a capability is missing.
#pragma once
#include <cpuid.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace testutil {

namespace fs = std::filesystem;

// The build directory: the test binary lives in it.
inline fs::path build_dir() { return fs::canonical("/proc/self/exe").parent_path(); }
inline fs::path source_dir() { return build_dir().parent_path(); }
// The cptrace under test: the build's, or CPTRACE_TEST_CPTRACE (the sanitized
// build of `make sanitize-cptrace`).
inline std::string cptrace_bin() {
  const char* other = std::getenv("CPTRACE_TEST_CPTRACE");
  return other && *other ? std::string(other) : (build_dir() / "cptrace").string();
}
// Whether CPUID offers rdtscp: what the library and the recorder go by (a VM
// may hide it and still run it, with a TSC_AUX its kernel never set).
inline bool cpu_offers_rdtscp() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

inline bool sanitized_cptrace() { return cptrace_bin() != (build_dir() / "cptrace").string(); }

inline std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/cptrace-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& s) const { return (path / s).string(); }
};

struct RunResult {
  int status = -1;  // exit code, or 128+signal
  std::string out, err;
};

// Runs a shell command line; stdout and stderr captured through files.
inline RunResult run(const std::string& cmdline, const TempDir& tmp) {
  std::string o = tmp / "run.out", e = tmp / "run.err";
  int st = system((cmdline + " >" + o + " 2>" + e).c_str());
  RunResult r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = read_file(o);
  r.err = read_file(e);
  return r;
}

// The headless browser the report tests render pages with ("" when none).
inline std::string chromium() {
  for (const char* p : {"chromium", "chromium-browser", "google-chrome"})
    if (system((std::string("command -v ") + p + " >/dev/null 2>&1").c_str()) == 0) return p;
  return "";
}

// The DOM of a page after its script ran (no network: the page must not need it).
inline std::string rendered_dom(const std::string& html, const TempDir& tmp) {
  RunResult r = run(chromium() + " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                        (tmp / "chromium-profile") + " --virtual-time-budget=5000 --dump-dom file://" + html,
                    tmp);
  return r.status == 0 ? r.out : "";
}

// A background process started with fork/exec (argv via /bin/sh -c), stdout and
// stderr to files, so a test can signal it and read what it printed so far.
struct Proc {
  pid_t pid = -1;
  std::string out_path, err_path;
  Proc(const std::string& cmdline, const std::string& out, const std::string& err) : out_path(out), err_path(err) {
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      execl("/bin/sh", "sh", "-c", ("exec " + cmdline + " >" + out + " 2>" + err).c_str(), nullptr);
      _exit(127);
    }
  }
  // Waits until `needle` appears in stdout (or stderr); false on timeout.
  bool wait_for(const std::string& needle, double timeout_s, bool in_stderr = false) const {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      if (read_file(in_stderr ? err_path : out_path).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Exit code (or 128+signal); waits at most timeout_s, then kills.
  int wait(double timeout_s = 120) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        ADD_FAILURE() << "process timed out after " << timeout_s << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~Proc() {
    if (pid > 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Skips (loudly) a test that needs root and a BPF-capable kernel.
#define REQUIRE_BPF()                                                               \
  do {                                                                              \
    if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root to load BPF programs"; \
    if (!std::filesystem::exists("/sys/kernel/btf/vmlinux"))                        \
      GTEST_SKIP() << "SKIPPED: kernel has no BTF (/sys/kernel/btf/vmlinux)";       \
    if (!std::filesystem::exists("/sys/bus/event_source/devices/uprobe/type"))      \
      GTEST_SKIP() << "SKIPPED: kernel has no uprobe PMU";                          \
  } while (0)

}  // namespace testutil
