// MinRTT rounds of a node pair as causality constraints.
#include "translate/sync_pairs.h"

#include <algorithm>
#include <limits>

namespace cptrace {
namespace {

constexpr uint64_t kTscRange = uint64_t(std::numeric_limits<int64_t>::max() / 4);

bool fits(uint64_t v) { return v <= kTscRange; }
uint64_t earlier(uint64_t t, uint64_t e) { return t - std::min(t, e); }
uint64_t later(uint64_t t, uint64_t e) { return t + std::min(e, kTscRange); }

// The responder turns its kernel receive stamp t2 into TSC with a line through
// two clock points: one taken once the probe is about to be read, one after its
// reply's transmit stamp (StampClock). A probe that waited in the socket while
// the responder was not running (a loaded node) arrived before the first point,
// so t2 was extrapolated, and the line's slope error grows with the distance:
// seen 0.68 us off on a 32-node run (repro cluster-miss-1). Within one bracket
// length of the line (u2 - t2 <= t3 - u2) the error stays that of the points;
// past it, the responder's user-space read u2 (later than the arrival, so still
// causal) replaces t2. Rounds without user stamps cannot be judged: kept.
uint64_t responder_receive(const SyncRound& r, PairRounds& out) {
  if (r.u2 == 0 || r.u2 < r.t2) return r.t2;
  uint64_t gap = r.u2 - r.t2, span = r.t3 > r.u2 ? r.t3 - r.u2 : 0;
  if (gap <= span) return r.t2;
  out.receive_extrapolated++;
  return r.u2;
}

// Checked on the stamps as recorded, then widened (rounds_with_peer's errors):
// widening moves t2 later and t3 earlier, so a responder that held the packet
// for less than twice its skew error would fail "t3 >= t2" after it, though
// each widened half (t1 -> t2, t3 -> t4) is still a true causal constraint.
void take(const std::vector<SyncRound>& in, bool x_initiated, uint64_t own_err, uint64_t peer_err, PairRounds& out) {
  for (const SyncRound& r : in) {
    if (!r.kernel_ok) {
      out.not_kernel++;
      continue;
    }
    if (!fits(r.t1) || !fits(r.t2) || !fits(r.t3) || !fits(r.t4) || r.t4 < r.t1 || r.t3 < r.t2 || r.kernel_rtt() <= 0) {
      out.inconsistent++;
      continue;
    }
    uint64_t t2 = responder_receive(r, out);
    out.rounds.push_back({r.phase, r.seq, x_initiated, int64_t(earlier(r.t1, own_err)), int64_t(later(t2, peer_err)),
                          int64_t(earlier(r.t3, peer_err)), int64_t(later(r.t4, own_err))});
  }
}

}  // namespace

std::vector<SyncRound> rounds_with_peer(const std::vector<SyncRound>& initiated, const std::string& peer) {
  std::vector<SyncRound> v;
  for (const SyncRound& r : initiated)
    if (r.peer == peer) v.push_back(r);
  return v;
}

PairRounds pair_rounds(const std::vector<SyncRound>& x_rounds, const std::vector<SyncRound>& y_rounds, uint64_t x_err,
                       uint64_t y_err) {
  PairRounds p;
  take(x_rounds, true, x_err, y_err, p);
  take(y_rounds, false, y_err, x_err, p);
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
