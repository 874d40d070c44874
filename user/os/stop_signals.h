// SIGINT and SIGTERM as a request to stop, for as long as a StopSignals lives:
// every command that runs until interrupted (record, cluster record, gen, sink,
// minrttd) takes them this one way. The handler notes the signal, sets the
// caller's flag and wakes a poll() through a self-pipe, all async-signal-safe;
// the dispositions that were in place come back when it ends. One at a time:
// the handler's state is process-wide.
#pragma once
#include <signal.h>

#include <atomic>

namespace cptrace {

class StopSignals {
 public:
  // `also_set`: a flag the caller's loop already watches, set true on a signal.
  explicit StopSignals(std::atomic<bool>* also_set = nullptr);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal that came (SIGINT or SIGTERM; the first one), 0 while none did.
  int signal() const;
  // Readable once a signal came: for poll() loops over other descriptors too.
  int wake_fd() const { return pipe_[0]; }
  // Sleeps until a signal came or `timeout_ms` passed (< 0: no timeout);
  // returns signal().
  int wait(int timeout_ms) const;

 private:
  int pipe_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace cptrace
