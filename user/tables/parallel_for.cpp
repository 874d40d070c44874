#include "tables/parallel_for.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <latch>
#include <thread>

namespace cptrace {

namespace {

// Never destroyed: its threads are detached and may still wait on its
// condition variable while the process exits.
struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  struct Task {
    std::function<void()> fn;
    std::latch* done;
  };
  std::deque<Task> tasks;
  size_t idle = 0;

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    ++idle;
    for (;;) {
      cv.wait(lock, [&] { return !tasks.empty(); });
      --idle;
      Task task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      task.fn();  // parallel_for's tasks catch what their items throw
      lock.lock();
      ++idle;
      task.done->count_down();  // idle first: the caller's next call finds this thread
    }
  }
};

std::mutex g_mu;
Pool* g_pool = nullptr;
pid_t g_pid = 0;
std::atomic<size_t> g_started{0};

Pool& pool() {
  std::lock_guard<std::mutex> lock(g_mu);
  // A forked child has none of its parent's threads: it starts a pool of its
  // own (the parent's, copied, is left alone).
  if (!g_pool || g_pid != getpid()) {
    g_pool = new Pool;
    g_pid = getpid();
  }
  return *g_pool;
}

}  // namespace

size_t helper_threads::started() { return g_started.load(); }

// Never throws: a caller that saw an exception could not know whether its
// task (which refers to the caller's frame) is still queued.
bool helper_threads::run(std::function<void()> task, std::latch& done) noexcept {
  try {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    p.tasks.push_back({std::move(task), &done});
    if (p.tasks.size() > p.idle) {
      try {
        std::thread([&p] { p.loop(); }).detach();
        g_started++;
      } catch (...) {  // no thread (EAGAIN) or no memory for its state
        p.tasks.pop_back();
        return false;
      }
    }
    p.cv.notify_one();
    return true;
  } catch (...) {  // no memory for the pool or the queued task: nothing queued
    return false;
  }
}

}  // namespace cptrace
