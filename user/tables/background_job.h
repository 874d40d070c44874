// One job at a time on a thread of its own while the caller prepares the next
// one: the double buffering of both table-file writers (a chunk compressed, a
// page encoded, while the next is filled). The job's exception is rethrown to
// the caller at the next wait(), on the caller's thread.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace cptrace {

class BackgroundJob {
 public:
  // Starts the thread; `job` runs on it once per start(). What the job reads
  // and writes is the job's alone between start() and the wait() after it.
  explicit BackgroundJob(std::function<void()> job);
  ~BackgroundJob();  // lets a running job finish, drops one not yet begun, ends the thread
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Runs the job once more; the one before must have been waited for.
  void start();
  // Until the job started last is done; rethrows what it threw.
  void wait();

 private:
  void loop();

  std::function<void()> job_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace cptrace
