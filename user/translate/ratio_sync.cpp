// Ratio method: two MinRTT anchors, four vertex lines.
#include "translate/ratio_sync.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {
namespace {

// Floor of the midpoint without overflow.
int64_t mid(int64_t a, int64_t b) { return a + (b - a) / 2; }

const PairRound* tightest(const std::vector<PairRound>& rounds, const char* phase) {
  const PairRound* best = nullptr;
  for (const PairRound& r : rounds)
    if (r.phase == phase && (!best || r.rtt() < best->rtt())) best = &r;
  return best;
}

}  // namespace

RatioAnchor ratio_anchor(const PairRound& r, double skew) {
  RatioAnchor a;
  a.round = r;
  if (r.x_initiated) {
    a.x = mid(r.t1, r.t4);
    a.y = mid(r.t2, r.t3);
  } else {
    a.x = mid(r.t2, r.t3);
    a.y = mid(r.t1, r.t4);
  }
  // The exact half-width is r/2 + (rate - 1)(t4 - t1)/2 (or (1 - rate)(t3 - t2)/2,
  // smaller, when Y initiated); bound both by the larger term.
  long double half = (long double)r.rtt() / 2 + (long double)skew * (long double)(r.t4 - r.t1) / 2;
  a.e = int64_t(std::ceil(half)) + 2;
  return a;
}

RatioSync ratio_sync(const std::vector<PairRound>& rounds, const std::string& pair) {
  const PairRound* j = tightest(rounds, "start");
  const PairRound* m = tightest(rounds, "stop");
  if (!j || !m)
    throw std::runtime_error(
        fmt::format("{}: ratio method needs kernel-timestamped MinRTT rounds at start and stop; "
                    "missing {} samples",
                    pair,
                    !j && !m ? "MinRTT1 (start) and MinRTT2 (stop)"
                    : !j     ? "MinRTT1 (start)"
                             : "MinRTT2 (stop)"));
  RatioSync s;
  // First pass without the rate term, to bound |1 - rate| for the second.
  RatioAnchor j0 = ratio_anchor(*j, 0), m0 = ratio_anchor(*m, 0);
  long double D = (long double)(m0.x - j0.x);
  if (D <= 0) throw std::runtime_error(fmt::format("{}: MinRTT2 is not after MinRTT1 on the same clock", pair));
  long double rate = (long double)(m0.y - j0.y) / D;
  s.skew_bound = double(std::fabs(1 - rate) + 4 * (long double)(j0.e + m0.e) / D + 1e-6);
  s.j = ratio_anchor(*j, s.skew_bound);
  s.m = ratio_anchor(*m, s.skew_bound);
  int64_t jx = s.j.x, jy = s.j.y, mx = s.m.x, my = s.m.y;
  if (my - s.m.e <= jy + s.j.e)
    throw std::runtime_error(
        fmt::format("{}: span between MinRTT1 and MinRTT2 ({} ticks) is too short for their "
                    "errors ({} and {} ticks)",
                    pair, mx - jx, s.j.e, s.m.e));
  s.lines.lines = {{{jx, jy + s.j.e}, {mx, my - s.m.e}},  // min slope
                   {{jx, jy - s.j.e}, {mx, my + s.m.e}},  // max slope
                   {{jx, jy - s.j.e}, {mx, my - s.m.e}},
                   {{jx, jy + s.j.e}, {mx, my + s.m.e}}};
  s.lines.find_extremes();
  s.relation = std::make_shared<PiecewiseRelation>(std::vector<PiecewiseRelation::Piece>{{0, s.lines}});
  return s;
}

nlohmann::json RatioSync::report() const {
  auto anchor = [](const RatioAnchor& a) {
    return nlohmann::json{{"phase", a.round.phase},
                          {"seq", a.round.seq},
                          {"initiator", a.round.x_initiated ? "from" : "to"},
                          {"minrtt_ticks", a.round.rtt()},
                          {"e_ticks", a.e},
                          {"x", a.x},
                          {"y", a.y}};
  };
  long double D = (long double)(m.x - j.x);
  return {{"minrtt1", anchor(j)},
          {"minrtt2", anchor(m)},
          {"span_ticks", m.x - j.x},
          {"ratio", double((long double)(m.y - j.y) / D)},
          {"skew_bound", skew_bound}};
}

}  // namespace cptrace
