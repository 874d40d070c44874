// Which inputs bound a node pair's clock relation: its MinRTT rounds, the traffic
// matched between the two nodes' packet captures (packet_pairs.h), both, or only
// the two together; and, for an input that does not, why (no rounds, traffic in
// one direction only, hulls that cross, ...). Translation uses all constraints of
// the pair at once; this says what each input could do alone, for the output.
#pragma once
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "translate/sync_pairs.h"

namespace cptrace {

struct PairInputs {
  size_t rounds = 0;  // usable MinRTT rounds
  size_t packets_out = 0, packets_in = 0;  // matched packets from -> to, to -> from
  bool rounds_bound = false, traffic_bound = false, together_bound = false;
  std::string rounds_why, traffic_why;  // why that input alone gives no bound ("" when it does)
  // "both", "rounds", "traffic", "rounds+traffic" (only together), or "none".
  std::string bounded_by() const;
  nlohmann::json to_json() const;
};

// x -> y: `rounds` and `traffic` are the pair's constraints of each kind. What
// bounds depends on the clock model: the linear one (hull_sync.h) needs a line
// through each input's constraints, the piecewise one (drift_bound.h) only
// constraints on both sides.
PairInputs assess_inputs(const Constraints& rounds, size_t n_rounds, const Constraints& traffic,
                         std::pair<size_t, size_t> packets, bool piecewise);
// All constraints of a and b.
Constraints merge(const Constraints& a, const Constraints& b);

}  // namespace cptrace
