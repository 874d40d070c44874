#include "os/stop_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace cptrace {
namespace {

// The live StopSignals' state, for the handler: lock-free atomics and a
// write(2) are all it touches.
std::atomic<int> g_signal{0};
std::atomic<int> g_wake_fd{-1};
std::atomic<std::atomic<bool>*> g_also_set{nullptr};
std::atomic<bool> g_live{false};

void on_stop_signal(int sig) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  if (std::atomic<bool>* f = g_also_set.load()) f->store(true);
  int saved = errno;  // the interrupted code may be reading errno
  char c = 0;
  if (int fd = g_wake_fd.load(); fd >= 0 && write(fd, &c, 1) < 0) {
  }  // full pipe: it is readable already
  errno = saved;
}

}  // namespace

StopSignals::StopSignals(std::atomic<bool>* also_set) {
  if (g_live.exchange(true)) throw std::logic_error("StopSignals: one is already in place");
  if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_live = false;
    throw std::system_error(errno, std::generic_category(), "stop signals: pipe");
  }
  g_signal = 0;
  g_also_set = also_set;
  g_wake_fd = pipe_[1];
  // No SA_RESTART: a sleep or a read in the main loop returns EINTR and the
  // loop sees the request at once.
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_wake_fd = -1;
  g_also_set = nullptr;
  close(pipe_[0]), close(pipe_[1]);
  g_live = false;
}

int StopSignals::signal() const { return g_signal.load(); }

int StopSignals::wait(int timeout_ms) const {
  pollfd p{pipe_[0], POLLIN, 0};
  if (signal() == 0) poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms);
  return signal();
}

}  // namespace cptrace
