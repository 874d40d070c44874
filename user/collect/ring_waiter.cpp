#include "collect/ring_waiter.h"

#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace cptrace {

RingWaiter::RingWaiter(ring_buffer* rb, const std::string& what) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  bool ok = epoll_fd_ >= 0 && wake_fd_ >= 0;
  if (ok && rb) ok = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb), &ev) == 0;
  if (ok) ok = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0;
  if (!ok) {
    int err = errno;
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    throw std::runtime_error(what + ": setting up its epoll wait: " + strerror(err));
  }
}

RingWaiter::~RingWaiter() {
  close(epoll_fd_);
  close(wake_fd_);
}

bool RingWaiter::wait(int timeout_ms) {
  epoll_event ev[2];
  int n = epoll_wait(epoll_fd_, ev, 2, timeout_ms);
  uint64_t v;
  ssize_t r = read(wake_fd_, &v, sizeof v);  // nonblocking: resets the eventfd if it fired
  (void)r;
  return n >= 0 || errno == EINTR;
}

void RingWaiter::wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;  // only fails when the counter is near 2^64: a wakeup is pending anyway
}

}  // namespace cptrace
