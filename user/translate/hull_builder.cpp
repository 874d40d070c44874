// Monotone-chain hulls, one point at a time.
#include "translate/hull_builder.h"

#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {
namespace {

using i128 = __int128;

// > 0: b lies left of (above, for o.x < a.x) the directed line o -> a.
i128 cross(const Pt& o, const Pt& a, const Pt& b) {
  return i128(a.x - o.x) * (i128(b.y) - o.y) - (i128(a.y) - o.y) * (i128(b.x) - o.x);
}

}  // namespace

void IncrementalHull::push(const Pt& p) {
  ++pushed_;
  if (!h_.empty()) {
    const Pt& last = h_.back();
    if (p.x < last.x)
      throw std::invalid_argument(
          fmt::format("hull: point x {} after x {}: constraints must be ordered by x", p.x, last.x));
    if (p.x == last.x) {
      // At equal x only the binding point counts: the highest (upper) or lowest (lower).
      if (upper_ ? p.y <= last.y : p.y >= last.y) return;
      h_.pop_back();
    }
  }
  while (h_.size() >= 2) {
    i128 c = cross(h_[h_.size() - 2], h_.back(), p);
    if (upper_ ? c >= 0 : c <= 0)
      h_.pop_back();
    else
      break;
  }
  h_.push_back(p);
  if (h_.size() > peak_) peak_ = h_.size();
}

}  // namespace cptrace
