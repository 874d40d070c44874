// MinRTT rounds of a node pair as causality constraints.
#include "translate/sync_pairs.h"

#include <algorithm>
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

std::vector<SyncRound> rounds_with_peer(const std::vector<SyncRound>& initiated, const std::string& peer,
                                        uint64_t own_err, uint64_t peer_err) {
  constexpr uint64_t kTscRange = uint64_t(std::numeric_limits<int64_t>::max() / 4);
  auto earlier = [](uint64_t t, uint64_t e) { return t - std::min(t, e); };
  std::vector<SyncRound> v;
  for (const SyncRound& r : initiated)
    if (r.peer == peer) {
      SyncRound w = r;
      w.t1 = earlier(r.t1, own_err), w.t4 = r.t4 + std::min(own_err, kTscRange);
      w.t2 = r.t2 + std::min(peer_err, kTscRange), w.t3 = earlier(r.t3, peer_err);
      v.push_back(w);
    }
  return v;
}

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
