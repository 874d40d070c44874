// Keeps the clock-correlation stream going while the recorder's main loop is
// blocked: the closing MinRTT rounds take seconds, and a clock that NTP slews
// meanwhile leaves the kernel stamps of that span (the rounds' own packets,
// when --net records them) with only the assumption-free bound unless points
// keep coming (docs/clock.md).
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "trace/trace_format.h"

namespace cptrace {

class CorrelationKeeper {
 public:
  // Calls `sample` every `period` on its own thread until finish().
  CorrelationKeeper(std::function<ClockPoint()> sample, std::chrono::milliseconds period)
      : sample_(std::move(sample)), period_(period), thread_([this] { run(); }) {}
  ~CorrelationKeeper() { finish(); }
  // Stops and joins; the points taken, in order.
  std::vector<ClockPoint> finish() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return std::move(points_);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, period_, [this] { return stop_; })) points_.push_back(sample_());
  }
  std::function<ClockPoint()> sample_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<ClockPoint> points_;
  std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace cptrace
