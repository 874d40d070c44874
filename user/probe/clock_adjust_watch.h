// The system-wide watch on clock-adjusting system calls (bpf/clockadj.bpf.c):
// adjtimex, clock_adjtime, clock_settime, settimeofday by any process, each a
// cp_clockadj_rec (include/cptrace_clockadj.h) in one small ring. The recorder
// waits on fd() instead of sleeping, so a call wakes it at once and it can take
// correlation points around the change.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cptrace_clockadj.h"

struct clockadj_bpf;
struct ring_buffer;

namespace cptrace {

class ClockAdjustWatch {
 public:
  // Loads and attaches the programs. Throws std::runtime_error saying what
  // failed (no syscall tracepoints, BPF refused) — see start_clock_adjust_watch.
  ClockAdjustWatch();
  ~ClockAdjustWatch();
  ClockAdjustWatch(const ClockAdjustWatch&) = delete;
  ClockAdjustWatch& operator=(const ClockAdjustWatch&) = delete;

  // Readable (poll/epoll) when records are waiting.
  int fd() const;
  // Every record waiting now, oldest first.
  std::vector<cp_clockadj_rec> take();
  // Calls seen, and of those not written (ring full), since start.
  uint64_t seen() const;
  uint64_t dropped() const;

 private:
  static int on_record(void* self, void* data, size_t len);
  uint64_t counter(int i) const;
  clockadj_bpf* skel_ = nullptr;
  ring_buffer* rb_ = nullptr;
  std::vector<cp_clockadj_rec> pending_;
};

// The watch, or nullptr with `why_not` set to one line (the kernel lacks the
// syscall tracepoints, or refused the programs): recording goes on without it,
// seeing adjustments only through the NTP state read at each correlation point.
std::unique_ptr<ClockAdjustWatch> start_clock_adjust_watch(std::string& why_not);

}  // namespace cptrace
