#include "clock/skew_watch.h"

namespace cptrace {

SkewWatch::SkewWatch(std::chrono::milliseconds period, std::chrono::microseconds budget)
    : period_(period), budget_(budget) {
  if (period_.count() > 0) thread_ = std::thread([this] { run(); });
}

SkewWatch::~SkewWatch() { finish(); }

std::vector<TscSkew> SkewWatch::finish() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> g(mu_);
  return taken_;
}

bool SkewWatch::wait_for_measures(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> g(mu_);
  return cv_.wait_for(g, timeout, [&] { return taken_.size() >= n; });
}

// The measure runs outside the lock, so finish() never waits on more than the
// one in progress (its budget).
void SkewWatch::run() {
  std::unique_lock<std::mutex> g(mu_);
  while (!cv_.wait_for(g, period_, [this] { return stop_; })) {
    g.unlock();
    TscSkew s = measure_tsc_skew(budget_, SkewRetry::None);
    g.lock();
    taken_.push_back(std::move(s));
    cv_.notify_all();  // wait_for_measures
  }
}

}  // namespace cptrace
