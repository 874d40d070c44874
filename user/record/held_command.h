// `record -- CMD`: the command is forked first (so its pid can filter the
// probes) but held on a pipe until the probes are attached, so not one of its
// events is missed; then released to exec.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace cptrace {

class HeldCommand {
 public:
  // Forks a child that waits for release(), then execs cmd (PATH lookup).
  // Throws if the pipe or the fork fails.
  explicit HeldCommand(const std::vector<std::string>& cmd);
  // Not released: the child reads EOF and exits 127 without running anything.
  ~HeldCommand();
  HeldCommand(const HeldCommand&) = delete;
  HeldCommand& operator=(const HeldCommand&) = delete;

  pid_t pid() const { return pid_; }
  void release();
  // Non-blocking: true once the command has ended (its status is then kept).
  bool poll_exited();
  // Passes a stop signal on to a still-running command (as a shell's Ctrl-C
  // reaches every process of the foreground job) ...
  void signal(int sig);
  // ... and later waits for it to end.
  void wait();
  // Like a shell: the command's exit code, or 128 + the signal that ended it.
  int exit_status() const;

 private:
  pid_t pid_ = -1;
  int release_fd_ = -1;
  int status_ = 0;
  bool exited_ = false;
};

}  // namespace cptrace
