// A crash of cptrace itself says where it happened before the process dies:
// on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, one line "cptrace CMD: fatal
// signal ..." and the stack (frames as binary+offset, for addr2line) go to
// stderr, then the signal is raised again with its default action, so the exit
// status and a core dump are what they would have been. As perf does: a crash
// seen once in a long test run must name its place, or it cannot be fixed.
//
// The handler runs on its own stack (a stack overflow is reported too) and
// calls only write(2) (say_raw), backtrace(), backtrace_symbols_fd() and raise(); the
// unwinder backtrace() loads on first use is loaded before the handler is
// installed. The sanitizers' builds keep their own reports: there it installs
// nothing.
#pragma once

namespace cptrace {

// Installs the handler for this process (after set_command_name: the prefix
// is copied then). exec() resets it, so a command cptrace runs never sees it.
void report_fatal_signals();
// Back to the default actions, in a forked child that may die of a fault on
// purpose (check's probe of the kernel's fork problem): its death is a finding,
// not a crash of cptrace to report.
void default_fatal_signals();

}  // namespace cptrace
