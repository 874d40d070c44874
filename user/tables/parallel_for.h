// The analysis's threads (`--threads`, carried in MemoryBudget): fn(i, worker)
// for every i in [0, n), each worker taking the next index as it finishes one,
// so unequal items (partitions of skewed ids) still keep every thread busy.
// Workers are std::threads started for the call (the calling thread is worker
// 0): the items are large (a partition, a batch of rows), so their start-up is
// noise. The first exception of any item is rethrown once all have stopped.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cptrace {

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
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace cptrace
