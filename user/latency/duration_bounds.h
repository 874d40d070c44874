// The bound of one tuple's duration by the tightest scenario that applies:
//   local-reference   both events on the reference node: exact.
//   local             both on one other node: d scaled by the feasible rates
//                     (ratio method: d r +- 2 d e / D).
//   reference-remote  one event on the reference: the other's instant bound (+-e).
//   remote-remote-direct / -via-reference   two other nodes: with MinRTT rounds
//                     between them, related directly (bound on the to-node's
//                     clock, then scaled to the reference), intersected with the
//                     difference of both instants' bounds; without, only the latter.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tables/tuple_join.h"
#include "translate/clock_relation.h"
#include "translate/relation_cursor.h"
#include "translate/stamp_errors.h"

namespace cptrace {

// One event of a tuple: its stamp on its node's TSC and its instant's bound on the
// reference TSC; what the tuple-id join carries of it, the same fields.
using DurationStamp = JoinStamp;

// The scenarios above from each node's relation to the reference and the direct
// pair relations. The translated trace's meta.json gives them (from_translated);
// the live view of a run builds them from the rounds read so far
// (analyze/run_view.h).
struct DurationBounds {
  std::vector<std::string> names;
  std::vector<RelationPtr> to_ref;
  // Per node: its stamps' own errors (translate's max_ts_err and cpu_ts_err).
  std::vector<StampErrors> errs;
  std::map<std::pair<size_t, size_t>, RelationPtr> direct;
  size_t ref = 0;

  static DurationBounds from_translated(const nlohmann::json& tr);
  // A stamp's own error: its CPU's where it names one (capped, so that two add
  // up within int64_t).
  int64_t stamp_err(const DurationStamp& s) const {
    return int64_t(std::min<uint64_t>(errs[s.node].of(s.cpu_stamped, s.cpu), kTranslateTscRange));
  }
  // Inline: `latency` bounds every row through it.
  Bound duration(const DurationStamp& a, const DurationStamp& b, const char*& scenario) const {
    int64_t d = int64_t(b.local - a.local);
    if (a.node == b.node) {
      // Both stamps' own errors (a converted kernel stamp, the TSC skew of
      // each one's CPU): on the reference they are the instants' bounds
      // themselves. Two stamps read on one CPU's TSC have neither: d is exact.
      scenario = a.node == ref ? "local-reference" : "local";
      const bool same_cpu = one_cpu(a, b);
      if (a.node == ref) return same_cpu ? Bound{d, d, d} : Bound{b.lo - a.hi, d, b.hi - a.lo};
      int64_t e = same_cpu ? 0 : stamp_err(a) + stamp_err(b);
      return to_ref[a.node]->scale({d - e, d, d + e}, int64_t(a.local));
    }
    // Instant bounds are exact for the reference (lo = est = hi = local).
    Bound via{b.lo - a.hi, b.est - a.est, b.hi - a.lo};
    if (a.node == ref || b.node == ref) {
      scenario = "reference-remote";
      return via;
    }
    auto it = direct.find({a.node, b.node});
    if (it == direct.end()) {
      scenario = "remote-remote-via-reference";
      return via;
    }
    scenario = "remote-remote-direct";
    Bound g = it->second->at(int64_t(a.local));
    int64_t t = int64_t(b.local);
    Bound on_b{t - g.hi, t - g.est, t - g.lo};
    return intersect(to_ref[b.node]->scale(on_b, t), via, "remote-remote duration");
  }
};

}  // namespace cptrace
