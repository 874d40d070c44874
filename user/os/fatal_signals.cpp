#include "os/fatal_signals.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "os/say.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CPTRACE_SANITIZED 1
#endif

namespace cptrace {
namespace {

// Filled before the handler is installed: the handler formats nothing itself.
char g_prefix[128];
size_t g_prefix_len = 0;
alignas(16) char g_alt_stack[64 * 1024];
constexpr int kFatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// Hex without stdio (async-signal-safe).
void put_hex(uintptr_t v) {
  char buf[2 + 2 * sizeof v];
  size_t n = sizeof buf;
  do {
    buf[--n] = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v && n > 2);
  buf[--n] = 'x', buf[--n] = '0';
  say_raw(std::string_view(buf + n, sizeof buf - n));
}

void on_fatal(int sig, siginfo_t* info, void*) {
  say_raw(std::string_view(g_prefix, g_prefix_len));
  const char* name = sigabbrev_np(sig);
  say_raw("fatal signal SIG");
  if (name) say_raw(name);
  if (info && info->si_code > 0 && sig != SIGABRT) {  // a fault, not kill(2): the address means something
    say_raw(" at address ");
    put_hex(uintptr_t(info->si_addr));
  }
  say_raw("; stack (binary(+offset), for addr2line -e):\n");
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: this ends the process as the
  // signal would have (a fault re-executes the instruction on return anyway).
  raise(sig);
}

}  // namespace

void report_fatal_signals() {
#ifndef CPTRACE_SANITIZED
  std::string prefix = command_prefix() + ": ";
  g_prefix_len = std::min(prefix.size(), sizeof g_prefix);
  memcpy(g_prefix, prefix.data(), g_prefix_len);
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  stack_t ss{};
  ss.ss_sp = g_alt_stack;
  ss.ss_size = sizeof g_alt_stack;
  if (sigaltstack(&ss, nullptr) != 0) return;  // no own stack: the default action stays
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : kFatal) sigaction(sig, &sa, nullptr);
#endif
}

void default_fatal_signals() {
  for (int sig : kFatal) signal(sig, SIG_DFL);
}

}  // namespace cptrace
