#include "cluster/node_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "os/exec_argv.h"

namespace cptrace {

NodeProcess spawn_node_process(const std::vector<std::string>& argv) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", strerror(errno)));
  ExecArgv args(argv);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in[0], 0), dup2(out[1], 1), dup2(err[1], 2);
    signal(SIGPIPE, SIG_DFL);
    args.exec_or_exit(true);
  }
  close(in[0]), close(out[1]), close(err[1]);
  return {pid, in[1], out[0], err[0]};
}

int exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1; }

CaptureResult run_capture(const std::vector<std::string>& argv, double timeout_s) {
  NodeProcess p = spawn_node_process(argv);
  close(p.in);
  CaptureResult r;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (int open = 2; open > 0;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      kill(-p.pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{p.out, POLLIN, 0}, {p.err, POLLIN, 0}};
    if (poll(fds, 2, int(left)) < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        (k ? r.err : r.out).append(buf, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        close(k ? p.err : p.out);
        (k ? p.err : p.out) = -1;
        open--;
      }
    }
    if (p.out < 0 && p.err < 0) break;
  }
  if (p.out >= 0) close(p.out);
  if (p.err >= 0) close(p.err);
  int st = 0;
  while (waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = timed_out ? -1 : exit_status(st);
  return r;
}

std::string tail_lines(const std::string& s, size_t lines) {
  size_t end = s.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  size_t at = end + 1;
  for (size_t k = 0; k < lines && at > 0; ++k) {
    size_t nl = s.rfind('\n', at - 1);
    at = nl == std::string::npos ? 0 : nl;
    if (at == 0) break;
  }
  size_t from = s.find_first_not_of("\n", at);
  return s.substr(from, end + 1 - from);
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace cptrace
