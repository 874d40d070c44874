// Exact order statistics over more values than the memory budget holds.
//
// Values go into ValueColumns: in memory while a shared MemoryPool has room,
// then appended to the column's spill file. select_ranks() finds the k-th
// smallest values of a union of columns exactly: in memory (nth_element) when
// the union fits its share, else by narrowing passes: a histogram of 2^14
// buckets over the live range locates the bucket holding rank k, the next pass
// narrows to it, and once a bucket's values fit they are collected and
// selected. Each pass reads the columns once for all ranks asked; latency
// ranges settle in two or three passes. The answer is the same element
// nth_element over all values would give: percentiles stay exact.
#pragma once
#include <cstdint>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "tables/spill_file.h"

namespace cptrace {

struct MemoryPool {
  uint64_t limit = 0, used = 0;
  bool take(uint64_t n) {
    if (used + n > limit) return false;
    used += n;
    return true;
  }
};

class ValueColumn {
 public:
  ValueColumn(MemoryPool& pool, std::string dir) : pool_(&pool), dir_(std::move(dir)) {}
  void add(int64_t v) {
    if (v < min_) min_ = v;
    if (v > max_) max_ = v;
    ++n_;
    if (!file_ && (chunks_.empty() || chunks_.back().size() == kChunk) && !grow()) spill_from_now();
    if (file_)
      file_->append(&v, sizeof v);
    else
      chunks_.back().push_back(v);
  }
  uint64_t size() const { return n_; }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }
  bool spilled() const { return file_ != nullptr; }
  // fn(const int64_t* values, size_t n) over every value, in chunks.
  template <typename Fn>
  void scan(Fn&& fn) const {
    for (const auto& c : chunks_) fn(c.data(), c.size());
    if (!file_) return;
    SpillReader<int64_t> rd(*file_, 0, file_->size(), 64 << 10);
    std::vector<int64_t> chunk;
    chunk.reserve(1 << 13);
    while (const int64_t* v = rd.next()) {
      chunk.push_back(*v);
      if (chunk.size() == chunk.capacity()) {
        fn(chunk.data(), chunk.size());
        chunk.clear();
      }
    }
    if (!chunk.empty()) fn(chunk.data(), chunk.size());
  }

 private:
  // Values in fixed chunks taken from the pool: no reallocation doubles the
  // memory for a moment.
  static constexpr size_t kChunk = 1 << 16;
  bool grow();
  void spill_from_now();
  MemoryPool* pool_;
  std::string dir_;
  std::vector<std::vector<int64_t>> chunks_;
  std::unique_ptr<SpillFile> file_;
  uint64_t n_ = 0;
  int64_t min_ = INT64_MAX, max_ = INT64_MIN;
};

// The k-th smallest (0-based) of the union of `cols`, for each k in `ks` (each
// below the union's size), using at most about `mem_bytes` for the selection.
std::vector<int64_t> select_ranks(const std::vector<const ValueColumn*>& cols, const std::vector<uint64_t>& ks,
                                  uint64_t mem_bytes);

// Nearest-rank percentile index: p in [0, 1] of n > 0 values -> 0-based rank
// (k = max(1, ceil(p n)), as DuckDB's quantile_disc).
uint64_t nearest_rank_index(uint64_t n, double p);
// The nearest-rank percentile p of v (non-empty), in memory: v is reordered.
int64_t nearest_rank_select(std::vector<int64_t>& v, double p);

}  // namespace cptrace
