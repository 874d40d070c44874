// The ratio method of Cloudprofiler: the tightest MinRTT round near the start
// (MinRTT1, instant j) and near the stop (MinRTT2, instant m) of a recording each
// relate an instant of X to an instant of Y within +-e = MinRTT/2, and
//     r = (c_m^Y - c_j^Y) / (c_m^X - c_j^X),   c^Y = c_j^Y + r (c^X - c_j^X).
//
// As a clock relation (clock_relation.h) the feasible lines are those through the
// two vertical segments [c_j^Y +- e_j] and [c_m^Y +- e_m]: four vertex lines. Their
// envelope gives the paper's bounds exactly:
//   instant at fraction L = (x - c_j^X) / D of the span D:  +-(|1-L| e_j + |L| e_m)
//     (= e between the two MinRTTs when e_j = e_m = e: "reference <-> other node")
//   duration d on X:  d * r +- d (e_j + e_m) / D   (= 2 d e / D: "same node")
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"
#include "translate/sync_pairs.h"

namespace cptrace {

// One MinRTT round reduced to "X instant x corresponds to Y instant y +- e".
struct RatioAnchor {
  int64_t x = 0, y = 0, e = 0;
  PairRound round;
};

// e of a round: r/2, plus what the rate difference can add over the round
// (|1 - rate| * (t4 - t1) / 2, with the rate bounded by `skew`), plus 2 ticks for
// the midpoints rounded to integers.
RatioAnchor ratio_anchor(const PairRound& r, double skew);

struct RatioSync {
  RatioAnchor j, m;
  double skew_bound = 0;  // bound on |1 - rate| used in e
  LineSet lines;
  RelationPtr relation;
  nlohmann::json report() const;
};

// Throws std::runtime_error naming `pair` when the start or the stop rounds are
// missing, or the span between them is too short to give a positive rate.
RatioSync ratio_sync(const std::vector<PairRound>& rounds, const std::string& pair);

}  // namespace cptrace
