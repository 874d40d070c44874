// The sleep of every ring-consuming thread (ring drain, network capture,
// process follower): one epoll set over a libbpf ring_buffer (which holds all
// its rings) and an eventfd. The thread sleeps until the BPF side wakes a ring
// (only past its wakeup threshold: a wakeup costs the producing thread an
// irq_work) or another thread calls wake() (flush, stop); it never polls.
#pragma once
#include <string>

struct ring_buffer;

namespace cptrace {

class RingWaiter {
 public:
  // Throws std::runtime_error naming `what` when the epoll set cannot be made.
  RingWaiter(ring_buffer* rb, const std::string& what);
  ~RingWaiter();
  RingWaiter(const RingWaiter&) = delete;
  RingWaiter& operator=(const RingWaiter&) = delete;

  // Sleeps until a ring is woken, wake() is called or timeout_ms passes
  // (-1: no timeout); resets a pending wake(). Returns false on an epoll error
  // other than EINTR.
  bool wait(int timeout_ms);
  // Thread-safe, async-signal-safe.
  void wake();

 private:
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
};

}  // namespace cptrace
