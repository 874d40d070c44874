// The analysis's threads (`--threads`, carried in MemoryBudget): fn(i, worker)
// for every i in [0, n), each worker taking the next index as it finishes one,
// so unequal items (partitions of skewed ids) still keep every thread busy.
// The calling thread is worker 0; the others are threads of a pool kept for
// the process (helper_threads), not started per call: `latency` calls this for
// every batch of 8 192 rows, and one thread started and joined per call was
// 1 811 threads for 5 M tuples. The first exception of any item is rethrown
// once all workers have stopped.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <latch>
#include <mutex>

namespace cptrace {

// Threads that run tasks handed to them, kept once started. A task always
// gets a thread at once: an idle one, or a new one when all are busy (so a
// parallel_for inside another's item never waits on the outer's workers).
// In a child forked after threads were started, a new pool starts empty.
namespace helper_threads {
// Runs `task` on a pool thread, then counts `done` down once that thread is
// idle again (so the next call finds it idle, and starts none); false when no
// thread could be started (the task is then not run, `done` not counted).
bool run(std::function<void()> task, std::latch& done) noexcept;
// Threads started in this process so far (for the tests).
size_t started();
}  // namespace helper_threads

template <typename Fn>
void parallel_for(unsigned threads, size_t n, Fn&& fn) {
  const unsigned workers = unsigned(std::min<size_t>(std::max(threads, 1u), n));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0u);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](unsigned w) {
    try {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i, w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(n);  // the others stop after their current item
    }
  };
  // Every helper counts down once it has stopped; the caller's locals live
  // until all have. A helper that could not be started takes no items.
  std::latch done(workers - 1);
  for (unsigned w = 1; w < workers; ++w) {
    // Nothing may leave this frame while a helper runs: a task that could
    // not be made or queued is one thread fewer, the others take its items.
    bool queued = false;
    try {
      queued = helper_threads::run([&, w] { work(w); }, done);
    } catch (...) {
    }
    if (!queued) done.count_down();
  }
  work(0);
  done.wait();
  if (error) std::rethrow_exception(error);
}

}  // namespace cptrace
