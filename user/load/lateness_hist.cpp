#include "load/lateness_hist.h"

#include <algorithm>
#include <cmath>

namespace cptrace {

// Values below 2^kSubBits have a bucket each; above, a power of two [2^e, 2^(e+1))
// is split into 2^kSubBits equal sub-buckets.
int LatenessHist::index(uint64_t v) {
  if (v < (1u << kSubBits)) return int(v);
  int e = 63 - __builtin_clzll(v);  // >= kSubBits
  int sub = int((v >> (e - kSubBits)) & ((1u << kSubBits) - 1));
  return ((e - kSubBits + 1) << kSubBits) + sub;
}

uint64_t LatenessHist::upper(int idx) {
  if (idx < (1 << kSubBits)) return uint64_t(idx);
  int e = (idx >> kSubBits) + kSubBits - 1;
  uint64_t sub = idx & ((1 << kSubBits) - 1);
  uint64_t lo = (uint64_t(1) << e) + (sub << (e - kSubBits));
  return lo + (uint64_t(1) << (e - kSubBits)) - 1;
}

void LatenessHist::record(int64_t ns) {
  if (ns < 0) ns = 0;  // early is impossible by construction; clamp clock noise
  b_[index(uint64_t(ns))]++;
  count_++;
  max_ = std::max(max_, ns);
}

void LatenessHist::merge(const LatenessHist& o) {
  for (int i = 0; i < kBuckets; ++i) b_[i] += o.b_[i];
  count_ += o.count_;
  max_ = std::max(max_, o.max_);
}

int64_t LatenessHist::quantile(double q) const {
  if (count_ == 0) return 0;
  if (q >= 1) return max_;
  uint64_t rank = uint64_t(std::ceil(q * double(count_)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += b_[i];
    if (seen >= rank) return std::min<int64_t>(int64_t(upper(i)), max_);
  }
  return max_;
}

}  // namespace cptrace
