// Which tuple ids the sink has seen: one bit per id of the expected range, so
// a gap or a duplicate is found exactly, at any rate, in 1 bit per tuple.
// Closed range [first, first+count) during a control round; open range
// [0, kOpenCap) when the sink runs without rounds.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace cptrace {

class IdLedger {
 public:
  static constexpr uint64_t kOpenCap = uint64_t(1) << 32;

  void reset_closed(uint64_t first, uint64_t count) {
    *this = IdLedger();
    closed_ = true;
    first_ = first;
    count_ = count;
    bits_.assign((count + 63) / 64, 0);
  }
  void reset_open() { *this = IdLedger(); }

  void mark(uint64_t id) {
    received_++;
    uint64_t off = id - first_;
    if (id < first_ || off >= (closed_ ? count_ : kOpenCap)) {
      outside_++;
      return;
    }
    if (!closed_ && off / 64 >= bits_.size()) bits_.resize(std::max<size_t>(off / 64 + 1, bits_.size() * 2), 0);
    uint64_t& w = bits_[off / 64];
    uint64_t m = uint64_t(1) << (off % 64);
    if (w & m) {
      dup_++;
      return;
    }
    w |= m;
    unique_++;
    lo_ = unique_ == 1 ? id : std::min(lo_, id);
    hi_ = std::max(hi_, id);
  }

  uint64_t received() const { return received_; }  // every tuple, inside the range or not
  uint64_t unique() const { return unique_; }
  uint64_t duplicates() const { return dup_; }
  uint64_t outside() const { return outside_; }
  // Closed: expected ids never seen. Open: ids between the lowest and the highest
  // seen that never arrived (a loss after the last tuple is invisible without rounds).
  uint64_t missing() const {
    if (closed_) return count_ - unique_;
    return unique_ ? (hi_ - lo_ + 1) - unique_ : 0;
  }
  // The first missing id (for messages), or UINT64_MAX.
  uint64_t first_missing() const {
    uint64_t n = closed_ ? count_ : (unique_ ? hi_ + 1 - first_ : 0);
    uint64_t from = closed_ ? 0 : lo_ - first_;
    for (uint64_t off = from; off < n; ++off)
      if (!(bits_[off / 64] >> (off % 64) & 1)) return first_ + off;
    return UINT64_MAX;
  }
  bool closed() const { return closed_; }
  uint64_t expected() const { return count_; }

 private:
  bool closed_ = false;
  uint64_t first_ = 0, count_ = 0;
  std::vector<uint64_t> bits_;
  uint64_t received_ = 0, unique_ = 0, dup_ = 0, outside_ = 0, lo_ = 0, hi_ = 0;
};

}  // namespace cptrace
