// MinRTT rounds of a node pair as causality constraints.
#include "translate/sync_pairs.h"

#include <limits>

namespace cptrace {
namespace {

bool fits(uint64_t v) { return v <= uint64_t(std::numeric_limits<int64_t>::max() / 4); }

void take(const std::vector<SyncRound>& in, bool x_initiated, PairRounds& out) {
  for (const SyncRound& r : in) {
    if (!r.kernel_ok) {
      out.not_kernel++;
      continue;
    }
    if (!fits(r.t1) || !fits(r.t2) || !fits(r.t3) || !fits(r.t4) || r.t4 < r.t1 || r.t3 < r.t2 || r.kernel_rtt() <= 0) {
      out.inconsistent++;
      continue;
    }
    out.rounds.push_back({r.phase, r.seq, x_initiated, int64_t(r.t1), int64_t(r.t2), int64_t(r.t3), int64_t(r.t4)});
  }
}

}  // namespace

PairRounds pair_rounds(const std::vector<SyncRound>& x_rounds, const std::vector<SyncRound>& y_rounds) {
  PairRounds p;
  take(x_rounds, true, p);
  take(y_rounds, false, p);
  return p;
}

Constraints round_constraints(const std::vector<PairRound>& rounds) {
  Constraints c;
  for (const PairRound& r : rounds) {
    if (r.x_initiated) {
      c.above.push_back({r.t1, r.t2});  // X -> Y: sent at x=t1, received at y=t2
      c.below.push_back({r.t4, r.t3});  // Y -> X: sent at y=t3, received at x=t4
    } else {
      c.below.push_back({r.t2, r.t1});  // Y -> X: sent at y=t1, received at x=t2
      c.above.push_back({r.t3, r.t4});  // X -> Y: sent at x=t3, received at y=t4
    }
  }
  return c;
}

}  // namespace cptrace
