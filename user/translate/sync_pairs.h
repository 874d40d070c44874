// The MinRTT rounds of one node pair, seen from the relation X -> Y (x on X's
// clock, y on Y's), whichever node initiated them, and the causality constraints
// they give (DESIGN.md, "Clock relation between nodes").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "translate/clock_relation.h"
#include "trace/sync_round.h"

namespace cptrace {

// Causality constraints on the true map y = f(x): every feasible line passes on
// or above each `below` point and on or below each `above` point. A message sent
// by Y at y_s and received by X at x_r gives below (x_r, y_s) (it was received
// after it was sent); a message sent by X at x_s and received by Y at y_r gives
// above (x_s, y_r). Packets matched by network capture plug in the same way.
struct Constraints {
  std::vector<Pt> below, above;
  size_t size() const { return below.size() + above.size(); }
};

struct PairRound {
  std::string phase;
  uint64_t seq = 0;
  bool x_initiated = false;  // X sent first (t1, t4 on X's clock)
  int64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;  // as recorded by the initiator
  int64_t rtt() const { return (t4 - t1) - (t3 - t2); }
};

struct PairRounds {
  std::vector<PairRound> rounds;  // usable: kernel_ok and consistent stamps, widened by the skews
  size_t not_kernel = 0;  // rounds without trustworthy kernel stamps
  size_t inconsistent = 0;  // rtt <= 0 or stamps out of order
  // The responder's kernel receive stamp was converted by extrapolation past its
  // clock points' bracket: its user-space read stands in for it (sync_pairs.cpp).
  size_t receive_extrapolated = 0;
};

// The rounds a node initiated with `peer` (its Sync frames), as recorded.
std::vector<SyncRound> rounds_with_peer(const std::vector<SyncRound>& initiated, const std::string& peer);

// x_rounds: rounds X initiated (X's sync_rounds with peer Y); y_rounds: Y's with
// peer X. A round is checked on its recorded stamps (kernel_ok, in order, RTT > 0),
// then each stamp is moved by its node's TSC skew across CPUs
// (TraceReader::tsc_skew_err: x_err for X's stamps, y_err for Y's) the way
// causality still holds for the true instants: sends earlier, receives later (the
// round's RTT grows by twice both skews, and t3 may fall before t2).
PairRounds pair_rounds(const std::vector<SyncRound>& x_rounds, const std::vector<SyncRound>& y_rounds,
                       uint64_t x_err = 0, uint64_t y_err = 0);
// Each round gives one below and one above point.
Constraints round_constraints(const std::vector<PairRound>& rounds);

}  // namespace cptrace
