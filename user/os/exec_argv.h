// A command line ready for exec in a forked child. The child of a process with
// threads may only call async-signal-safe functions until it execs (another
// thread may hold the allocator's lock at the fork): so the argv is built before
// the fork, and the child only execs it or says why it could not and _exits.
#pragma once
#include <string>
#include <vector>

namespace cptrace {

class ExecArgv {
 public:
  // `args` must outlive this object: the pointers are into its strings.
  explicit ExecArgv(const std::vector<std::string>& args);

  // In the child: execs the program (found on PATH with `search_path`, else
  // args[0] is its path); if that fails, writes "PREFIXcannot run ARG0: WHY"
  // to stderr and exits with 127, the shell's code for a command not run.
  [[noreturn]] void exec_or_exit(bool search_path, const char* prefix = "") const;

 private:
  std::vector<char*> argv_;
};

}  // namespace cptrace
