// What each input of a node pair can bound on its own.
#include "translate/pair_inputs.h"

#include <fmt/format.h>

#include "translate/hull_sync.h"

namespace cptrace {

std::string PairInputs::bounded_by() const {
  if (rounds_bound && traffic_bound) return "both";
  if (rounds_bound) return "rounds";
  if (traffic_bound) return "traffic";
  return together_bound ? "rounds+traffic" : "none";
}

nlohmann::json PairInputs::to_json() const {
  nlohmann::json j = {{"bounded_by", bounded_by()},
                      {"rounds", rounds},
                      {"packets_from_to", packets_out},
                      {"packets_to_from", packets_in}};
  if (!rounds_why.empty()) j["rounds_alone"] = rounds_why;
  if (!traffic_why.empty()) j["traffic_alone"] = traffic_why;
  return j;
}

Constraints merge(const Constraints& a, const Constraints& b) {
  Constraints c = a;
  c.below.insert(c.below.end(), b.below.begin(), b.below.end());
  c.above.insert(c.above.end(), b.above.begin(), b.above.end());
  return c;
}

namespace {

// Whether the clock model bounds the relation from these constraints alone, and
// why not ("" when it does).
std::string why_unbounded(const Constraints& c, bool piecewise) {
  if (piecewise) return !c.below.empty() && !c.above.empty() ? "" : "constraints on one side only";
  return hull_sync(c).problem;
}

}  // namespace

PairInputs assess_inputs(const Constraints& rounds, size_t n_rounds, const Constraints& traffic,
                         std::pair<size_t, size_t> packets, bool piecewise) {
  PairInputs in;
  in.rounds = n_rounds;
  in.packets_out = packets.first, in.packets_in = packets.second;
  if (n_rounds == 0) {
    in.rounds_why = "no MinRTT rounds";
  } else {
    in.rounds_why = why_unbounded(rounds, piecewise);
    in.rounds_bound = in.rounds_why.empty();
  }
  if (packets.first + packets.second == 0) {
    in.traffic_why = "no matched packets";
  } else if (packets.first == 0 || packets.second == 0) {
    in.traffic_why = fmt::format(
        "traffic in one direction only ({} packets one way, {} the other): one-way "
        "constraints bound the relation from one side only",
        packets.first, packets.second);
  } else {
    in.traffic_why = why_unbounded(traffic, piecewise);
    in.traffic_bound = in.traffic_why.empty();
  }
  if (!in.rounds_bound && !in.traffic_bound && n_rounds + packets.first + packets.second > 0)
    in.together_bound = why_unbounded(merge(rounds, traffic), piecewise).empty();
  return in;
}

}  // namespace cptrace
