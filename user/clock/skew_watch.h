// The cross-CPU TSC skew measured while recording, not only at its ends: a TSC
// whose CPUs drift apart (one the kernel distrusts, one that stops in deep idle)
// shows it as an interval that leaves the start and stop ones. The reader
// widens every stamp's skew term to hold what the measures saw
// (trace/tsc_skew_history.h, docs/clock.md "TSC trust").
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "clock/tsc_skew.h"

namespace cptrace {

class SkewWatch {
 public:
  // A measure every `period` (none when zero), each within `budget` and without
  // the real-time retry: the traced programs keep their CPUs.
  explicit SkewWatch(std::chrono::milliseconds period,
                     std::chrono::microseconds budget = std::chrono::milliseconds(10));
  ~SkewWatch();  // stops the thread
  SkewWatch(const SkewWatch&) = delete;
  SkewWatch& operator=(const SkewWatch&) = delete;

  // Stops measuring (idempotent); the measures taken so far, oldest first.
  std::vector<TscSkew> finish();

  // Waits until `n` measures are taken or `timeout` passes: whether they were.
  // A loaded host delays a measure, it does not skip it.
  bool wait_for_measures(size_t n, std::chrono::milliseconds timeout);

 private:
  void run();

  std::chrono::milliseconds period_;
  std::chrono::microseconds budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<TscSkew> taken_;
  std::thread thread_;
};

}  // namespace cptrace
