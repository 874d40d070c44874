// A log-linear histogram of non-negative durations in ns (HdrHistogram's layout,
// 64 sub-buckets per power of two: every recorded value is reported within 1.6%).
// The generator records one lateness per tuple; millions of values cost 4 KiB.
#pragma once
#include <array>
#include <cstdint>

namespace cptrace {

class LatenessHist {
 public:
  void record(int64_t ns);
  void merge(const LatenessHist& o);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  // Smallest bucket upper edge below which a fraction q of the values lie (0 if empty);
  // q = 1 gives the exact maximum.
  int64_t quantile(double q) const;

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;
  static int index(uint64_t v);
  static uint64_t upper(int idx);
  std::array<uint64_t, kBuckets> b_{};
  uint64_t count_ = 0;
  int64_t max_ = 0;
};

}  // namespace cptrace
