// A descriptor that becomes readable when a process ends (pidfd_open, Linux
// 5.3): the recorder sleeps on it beside its clock deadline, so it stops as its
// command or -p process ends, not at its next regular point up to 100 ms later.
#pragma once
#include <sys/types.h>

namespace cptrace {

class ExitWatch {
 public:
  // fd() is -1 where the kernel has no pidfd_open or the process is gone
  // already: callers then keep checking on their own cadence.
  explicit ExitWatch(pid_t pid);
  ~ExitWatch();
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

  int fd() const { return fd_; }
  // Without waiting: true once the process has ended (false without a pidfd).
  bool ended() const;

 private:
  int fd_ = -1;
};

}  // namespace cptrace
