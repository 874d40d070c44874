#include "tables/background_job.h"

#include <utility>

namespace cptrace {

BackgroundJob::BackgroundJob(std::function<void()> job) : job_(std::move(job)), thread_([this] { loop(); }) {}

BackgroundJob::~BackgroundJob() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundJob::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || busy_; });
    if (stop_) return;  // the writer is going away (an error on its way): nothing more to write
    lock.unlock();
    std::exception_ptr error;
    try {
      job_();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    busy_ = false;
    cv_.notify_all();
  }
}

void BackgroundJob::start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = true;
  }
  cv_.notify_all();
}

void BackgroundJob::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace cptrace
