// How far apart two nodes' CLOCK_REALTIME clocks actually were during a run:
// the error of NTP itself, measured with a strict bound (issue: no NTP tool can
// bound its own error; the seed paper compared against NTP).
//
// Each correlation point of node V that carries REALTIME says: at the instant V's
// CLOCK_MONOTONIC read m (a TSC instant inside the point's bracket), V's
// CLOCK_REALTIME was m + (REALTIME - MONOTONIC), that offset known as a strict
// interval. The translation maps the bracket onto the reference's TSC, the
// reference's conversion model (clock_bounds.h) inverts that to the reference's
// CLOCK_MONOTONIC, and its own REALTIME - MONOTONIC (unchanged between its two
// neighbouring points, else the sample is skipped: a step happened) gives the
// reference's CLOCK_REALTIME at the same instant. The difference is an interval
// that holds V's REALTIME minus the reference's at that instant.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "clock/clock_map.h"
#include "translate/clock_relation.h"

namespace cptrace {

struct RealtimeOffset {
  std::string node, reference;
  uint64_t samples = 0, skipped = 0;
  // Over all samples: the offset (node - reference, ns) was never below lo_min
  // nor above hi_max; `widest_ns` and `median_width_ns`: of one sample's interval.
  int64_t lo_min = 0, hi_max = 0, widest_ns = 0, median_width_ns = 0;
  // A strict lower bound on the largest |offset| during the run (0 when every
  // sample's interval holds 0).
  int64_t at_least_ns = 0;
  nlohmann::json to_json() const;
  static RealtimeOffset from_json(const nlohmann::json& j);
  std::string describe() const;  // one line for translate's output
};

// `node_pts`: node V's points; `to_ref`: V's TSC -> reference TSC; `ref_map`:
// the reference's clock map (its points carry REALTIME when recorded so).
RealtimeOffset measure_realtime_offset(const std::string& node, const std::vector<ClockPoint>& node_pts,
                                       const Relation& to_ref, const std::string& reference, const ClockMap& ref_map);

// describe() of a to_json() entry (translate's meta.json).
inline std::string realtime_offset_line(const nlohmann::json& j) { return RealtimeOffset::from_json(j).describe(); }

}  // namespace cptrace
