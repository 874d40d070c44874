#include "os/exit_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cptrace {

ExitWatch::ExitWatch(pid_t pid) {
  // glibc 2.36 has pidfd_open(); the system call keeps older ones building.
  fd_ = int(syscall(SYS_pidfd_open, pid, 0));
  if (fd_ < 0) fd_ = -1;
}

ExitWatch::~ExitWatch() {
  if (fd_ >= 0) close(fd_);
}

bool ExitWatch::ended() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

}  // namespace cptrace
