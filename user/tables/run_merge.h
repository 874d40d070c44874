// Records that arrive as runs, each already in key order, handed out merged in
// key order -- any number of times. Runs stay in memory while they fit
// `memory_bytes`; beyond that every run goes to one spill file and the merge
// reads each through its own buffer (a share of the budget).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tables/memory_budget.h"
#include "tables/spill_file.h"

namespace cptrace {

// Key(const T&) -> uint64_t, strictly increasing inside a run.
template <typename T, typename Key>
class RunMerge {
 public:
  RunMerge(uint64_t memory_bytes, std::string dir, Key key = Key())
      : limit_(std::max<uint64_t>(memory_bytes / sizeof(T), 1024)), dir_(std::move(dir)), key_(key) {
    // A real limit: reserved once (address space; pages come as it fills), so the
    // vector never doubles past it. No limit (latency()): grows as vectors do.
    if (memory_bytes <= (64ull << 30)) {
      mem_.reserve(limit_);
      advise_huge_pages(mem_.data(), limit_ * sizeof(T));
    }
  }

  void add(const T& x) {
    if (mem_.size() >= limit_) spill();
    mem_.push_back(x);
  }
  // add() of each of p[0, n), copied in blocks.
  void add(const T* p, size_t n) {
    while (n) {
      if (mem_.size() >= limit_) spill();
      size_t m = std::min<size_t>(n, limit_ - mem_.size());
      mem_.insert(mem_.end(), p, p + m);
      p += m, n -= m;
    }
  }
  // The records added since the last end_run() form one run.
  void end_run() {
    if (mem_.size() > run_begin_) mem_runs_.push_back({run_begin_, mem_.size()});
    run_begin_ = mem_.size();
  }
  uint64_t size() const { return count_on_file_ + mem_.size(); }

  // fn(const T&) over all records in key order (end_run() first).
  // Once anything is on file, the first call moves the rest there too and frees
  // the memory: the merge's read buffers then have the whole budget.
  template <typename Fn>
  void for_each(Fn&& fn) {
    if (file_runs_.empty() && mem_runs_.size() <= 1) {
      for (const T& x : mem_) fn(x);
      return;
    }
    if (!file_runs_.empty() && !mem_.empty()) {
      spill();
      std::vector<T>().swap(mem_);
      file_->seal();
    }
    merge(fn);
  }

 private:
  // The memory runs so far (the open one split at this point) go to the file.
  void spill() {
    end_run();
    if (!file_) file_ = std::make_unique<SpillFile>(dir_);
    for (auto [b, e] : mem_runs_) {
      uint64_t at = file_->size();
      file_->append(mem_.data() + b, (e - b) * sizeof(T));
      file_runs_.push_back({at, file_->size()});
      count_on_file_ += e - b;
    }
    mem_runs_.clear();
    mem_.clear();
    run_begin_ = 0;
  }

  template <typename Fn>
  void merge(Fn& fn) const {
    struct Cursor {
      const T* mem = nullptr;
      const T* mem_end = nullptr;
      std::unique_ptr<SpillReader<T>> rd;
      const T* cur = nullptr;
      void step() { cur = rd ? rd->next() : (mem != mem_end ? mem++ : nullptr); }
    };
    size_t runs = file_runs_.size() + mem_runs_.size();
    size_t buf = std::max<size_t>(4 << 10, limit_ * sizeof(T) / runs);
    std::vector<Cursor> cs(runs);
    size_t i = 0;
    for (auto [b, e] : file_runs_) cs[i++].rd = std::make_unique<SpillReader<T>>(*file_, b, e, buf);
    for (auto [b, e] : mem_runs_) {
      cs[i].mem = mem_.data() + b;
      cs[i++].mem_end = mem_.data() + e;
    }
    // A binary min-heap of (key, run) with replace-top: the run just taken
    // usually goes on, so its next key sifts down once instead of a pop and a
    // push; the keys sit in the heap, so comparing them reads no record.
    struct Top {
      uint64_t key;
      size_t run;
    };
    std::vector<Top> heap;
    heap.reserve(runs);
    for (size_t c = 0; c < runs; ++c) {
      cs[c].step();
      if (cs[c].cur) heap.push_back({key_(*cs[c].cur), c});
    }
    auto sift_down = [&](size_t i) {
      const Top x = heap[i];
      const size_t n = heap.size();
      for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        if (l + 1 < n && heap[l + 1].key < heap[l].key) ++l;
        if (!(heap[l].key < x.key)) break;
        heap[i] = heap[l];
        i = l;
      }
      heap[i] = x;
    };
    for (size_t i = heap.size() / 2; i-- > 0;) sift_down(i);
    while (!heap.empty()) {
      Cursor& c = cs[heap[0].run];
      fn(*c.cur);
      c.step();
      if (c.cur) {
        heap[0].key = key_(*c.cur);
      } else {
        heap[0] = heap.back();
        heap.pop_back();
        if (heap.empty()) break;
      }
      sift_down(0);
    }
  }

  uint64_t limit_;
  std::string dir_;
  Key key_;
  std::vector<T> mem_;
  size_t run_begin_ = 0;
  std::vector<std::pair<size_t, size_t>> mem_runs_;
  std::unique_ptr<SpillFile> file_;
  std::vector<std::pair<uint64_t, uint64_t>> file_runs_;
  uint64_t count_on_file_ = 0;
};

}  // namespace cptrace
