// os/fatal_signals: a crash of cptrace says which signal and where, on stderr,
// and still ends the process by that signal (exit status, core dump).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <string>

#include "os/fatal_signals.h"
#include "os/say.h"

namespace cptrace {
namespace {

// Runs `crash` in a child with the handler installed; its stderr and how it ended.
struct Crash {
  std::string err;
  int status = 0;
};
Crash crash_child(void (*crash)()) {
  int p[2];
  if (pipe(p) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    rlimit none{0, 0};  // a core of the test binary helps nobody
    setrlimit(RLIMIT_CORE, &none);
    dup2(p[1], STDERR_FILENO);
    close(p[0]);
    set_command_name("crashtest");
    report_fatal_signals();
    crash();
    _exit(0);
  }
  close(p[1]);
  Crash c;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) c.err.append(buf, size_t(n));
  close(p[0]);
  waitpid(pid, &c.status, 0);
  return c;
}

void bad_store() {
  volatile uintptr_t at = 8;  // not foldable into a trap instruction
  *reinterpret_cast<volatile int*>(at) = 1;
}

volatile int g_depth_limit = 1 << 30;  // never reached: the stack ends first
int deeper(int k) {
  volatile char pad[4096];
  pad[0] = char(k);
  return k >= g_depth_limit ? 0 : deeper(k + 1) + pad[0];
}
void overflow() { deeper(0); }

TEST(FatalSignals, ACrashSaysItsSignalAddressAndStackThenDiesOfIt) {
  Crash c = crash_child(bad_store);
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGSEGV);
  EXPECT_EQ(c.err.rfind("cptrace crashtest: fatal signal SIGSEGV at address 0x8;", 0), 0u) << c.err;
  EXPECT_NE(c.err.find("cptrace_tests("), std::string::npos) << "no frame of the binary:\n" << c.err;
}

// On the handler's own stack: an overflow of the main one is reported too.
TEST(FatalSignals, AStackOverflowIsReportedToo) {
  Crash c = crash_child(overflow);
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGSEGV);
  EXPECT_EQ(c.err.rfind("cptrace crashtest: fatal signal SIGSEGV", 0), 0u) << c.err;
}

TEST(FatalSignals, AnAbortIsReportedWithoutAnAddress) {
  Crash c = crash_child([] { abort(); });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGABRT);
  EXPECT_EQ(c.err.rfind("cptrace crashtest: fatal signal SIGABRT; stack", 0), 0u) << c.err;
}

}  // namespace
}  // namespace cptrace
