// RelationCursor: per-range proofs of which lines decide a relation's bound.
#include "translate/relation_cursor.h"

namespace cptrace {

void RelationCursor::load(Range& c, int64_t index) {
  // index << kRangeBits is at most x, and the range's last tick at most INT64_MAX.
  const int64_t u = int64_t(uint64_t(index) << kRangeBits), w = u + ((int64_t{1} << kRangeBits) - 1);
  c.loaded = true;
  c.index = index;
  c.proven = r_.decide(u, w, c.d);
  ++loaded_;
  proven_ += c.proven;
}

}  // namespace cptrace
