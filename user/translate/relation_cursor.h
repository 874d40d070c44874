// Relation::at for a stream of instants that come mostly in order (one node's
// events, in trace order): the lines that decide the bound are proven once per
// range of 2^kRangeBits ticks (Relation::decide) and reused for every instant in
// it, so an event costs one exact floor and one exact ceil instead of screening
// every vertex line of every set. Ranges where no proof exists (lines crossing
// inside, composed or drift-bounded relations) call Relation::at. Results are
// exactly Relation::at's.
#pragma once
#include <array>
#include <algorithm>
#include <cstdint>
#include <limits>

#include "translate/clock_relation.h"

namespace cptrace {

// The TSC values translation supports (int64 arithmetic with room for bounds):
// an event beyond is refused; a kernel stamp's interval reaching beyond it covers
// every supported value, so it is cut there, not narrowed.
constexpr uint64_t kTranslateTscRange = uint64_t(std::numeric_limits<int64_t>::max() / 4);

class RelationCursor {
 public:
  explicit RelationCursor(const Relation& r) : r_(r) {}
  Bound at(int64_t x) {
    Range& c = cache_[size_t(x >> kRangeBits) & (kSlots - 1)];
    if (!c.loaded || c.index != x >> kRangeBits) load(c, x >> kRangeBits);
    return c.proven ? c.d.at(x) : r_.at(x);
  }
  // A stamp ts whose own error is +-err (a converted kernel stamp, the TSC skew
  // across CPUs): the bound of ts, widened to those of ts - err and ts + err.
  Bound at_stamp(uint64_t ts, uint64_t err) {
    Bound b = at(int64_t(ts));
    if (err) {
      b.lo = at(int64_t(ts - std::min(ts, err))).lo;
      b.hi = at(int64_t(ts + std::min(err, kTranslateTscRange))).hi;
    }
    return b;
  }
  // Instants answered from a proven range / by Relation::at (for tests and bench).
  uint64_t proven_ranges() const { return proven_; }
  uint64_t loaded_ranges() const { return loaded_; }

 private:
  // 2^24 ticks: a few ms of a GHz clock, so the ranges that straddle a crossing
  // of lines (a handful per run) hold few events.
  static constexpr int kRangeBits = 24;
  // A few ranges kept, direct-mapped: events of several CPUs interleaved across
  // a range boundary do not reload the same range over and over.
  static constexpr size_t kSlots = 8;
  struct Range {
    bool loaded = false, proven = false;
    int64_t index = 0;
    Decision d;
  };
  void load(Range& c, int64_t index);

  const Relation& r_;
  std::array<Range, kSlots> cache_{};
  uint64_t proven_ = 0, loaded_ = 0;
};

}  // namespace cptrace
