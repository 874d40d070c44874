#include "record/held_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "os/exec_argv.h"

namespace cptrace {

HeldCommand::HeldCommand(const std::vector<std::string>& cmd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  // argv is built before the fork: the child only reads, execs or _exits.
  ExecArgv argv(cmd);
  pid_ = fork();
  if (pid_ < 0) {
    int err = errno;
    close(p[0]);
    close(p[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(err));
  }
  if (pid_ == 0) {
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) _exit(127);  // recorder gave up
    argv.exec_or_exit(true, "cptrace record: ");
  }
  close(p[0]);
  release_fd_ = p[1];
}

HeldCommand::~HeldCommand() {
  if (release_fd_ >= 0) close(release_fd_);
}

void HeldCommand::release() {
  if (write(release_fd_, "g", 1) != 1) throw std::runtime_error("cannot release the command");
  close(release_fd_);
  release_fd_ = -1;
}

bool HeldCommand::poll_exited() {
  if (!exited_ && waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
  return exited_;
}

void HeldCommand::signal(int sig) {
  if (!exited_) kill(pid_, sig);
}

void HeldCommand::wait() {
  if (!exited_ && waitpid(pid_, &status_, 0) == pid_) exited_ = true;
}

int HeldCommand::exit_status() const {
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return 0;
}

}  // namespace cptrace
