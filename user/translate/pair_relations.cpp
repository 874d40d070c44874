// Every node pair's relations: see pair_relations.h.
#include "translate/pair_relations.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "clock/tsc_frequency.h"
#include "translate/sync_pairs.h"
#include "os/say.h"

namespace cptrace {
namespace {

using nlohmann::json;

NodePair build_pair(const std::vector<TranslateNode>& nodes, size_t x, size_t y, const TranslateOptions& opt,
                    const PacketMatches& packets) {
  NodePair p;
  p.from = x, p.to = y;
  p.rounds = pair_rounds(rounds_with(nodes[x], nodes[y]), rounds_with(nodes[y], nodes[x]),
                         nodes[x].reader->tsc_skew_err(), nodes[y].reader->tsc_skew_err());
  if (opt.inputs == Inputs::Traffic) p.rounds.rounds.clear();
  std::string name = pair_name(nodes, x, y);
  Constraints rounds = round_constraints(p.rounds.rounds), traffic;
  std::pair<size_t, size_t> counts{0, 0};
  if (opt.inputs != Inputs::Rounds) {
    traffic = packets.constraints(x, y);
    counts = packets.counts(x, y);
  }
  p.inputs = assess_inputs(rounds, p.rounds.rounds.size(), traffic, counts, opt.clock_model == ClockModel::Piecewise);
  if (opt.inputs == Inputs::Traffic) p.inputs.rounds_why = "not used (--inputs traffic)";
  if (opt.inputs == Inputs::Rounds) p.inputs.traffic_why = "not used (--inputs rounds)";
  if (p.rounds.rounds.empty()) {
    p.ratio_error = fmt::format("{}: no usable MinRTT rounds ({} without kernel stamps, {} inconsistent)", name,
                                p.rounds.not_kernel, p.rounds.inconsistent);
  } else {
    try {
      p.ratio = ratio_sync(p.rounds.rounds, name);
    } catch (const std::exception& e) {
      p.ratio_error = e.what();
    }
  }
  if (rounds.size() + traffic.size() == 0) {
    p.why_none = p.ratio_error + "; no matched packets";
    return p;
  }
  p.hull = hull_sync(merge(rounds, traffic));
  RelationPtr r = p.ratio ? p.ratio->relation : nullptr, h = p.hull->relation;
  std::string hull_error = h ? ""
                             : fmt::format("{}: hull method: {} (rounds alone: {}; traffic alone: {})", name,
                                           p.hull->problem, p.inputs.rounds_bound ? "bounded" : p.inputs.rounds_why,
                                           p.inputs.traffic_bound ? "bounded" : p.inputs.traffic_why);
  p.chosen = choose_relation(opt.method, r, h, p.hull->linear);
  switch (opt.method) {
    case Method::Ratio:
      p.why_none = p.ratio_error;
      break;
    case Method::Hull:
      p.why_none = hull_error;
      break;
    case Method::Best:
      if (!r || !h) p.why_none = p.ratio_error + "; " + hull_error;
      break;
  }
  if (opt.clock_model == ClockModel::Piecewise) {
    // Replaces the linear relation: it holds whatever the rates did, within the bound.
    // The rates are bounded around the nodes' nominal frequency ratio: nodes tick
    // at different rates (drift_bound.h), so an unknown frequency is an error.
    double hz[2];
    for (size_t k : {size_t(0), size_t(1)}) {
      const TranslateNode& n = nodes[k == 0 ? x : y];
      hz[k] = nominal_tsc_hz(n.reader->meta(), n.reader->clock_map());
      if (!(hz[k] > 0)) throw std::runtime_error(unknown_tsc_hz_error(n.name + " (" + n.dir + ")"));
    }
    p.drift = std::make_shared<DriftBoundRelation>(merge(rounds, traffic), std::llround(opt.max_drift_ppm * 1000),
                                                   hz[0], hz[1]);
    p.chosen = p.drift->bounded() ? p.drift : nullptr;
    p.why_none = p.drift->bounded() ? ""
                                    : fmt::format(
                                          "{}: piecewise model: constraints on one side only (rounds alone: "
                                          "{}; traffic alone: {})",
                                          name, p.inputs.rounds_why, p.inputs.traffic_why);
  }
  return p;
}

}  // namespace

PairMap build_pairs(const std::vector<TranslateNode>& nodes, const TranslateOptions& opt,
                    const PacketMatches& packets) {
  PairMap pairs;
  for (size_t x = 0; x < nodes.size(); ++x)
    for (size_t y = 0; y < nodes.size(); ++y) {
      if (x == y) continue;
      check_matching(nodes, x, y);
      NodePair p = build_pair(nodes, x, y, opt, packets);
      if (!p.rounds.rounds.empty() || p.rounds.not_kernel + p.rounds.inconsistent > 0 ||
          p.inputs.packets_out + p.inputs.packets_in > 0)
        pairs.emplace(std::pair{x, y}, std::move(p));
    }
  return pairs;
}

json pair_json(const std::vector<TranslateNode>& nodes, const NodePair& p) {
  json j = {{"from", nodes[p.from].name},
            {"to", nodes[p.to].name},
            {"rounds", p.rounds.rounds.size()},
            {"rounds_without_kernel_stamps", p.rounds.not_kernel},
            {"rounds_inconsistent", p.rounds.inconsistent},
            {"rounds_receive_extrapolated", p.rounds.receive_extrapolated},
            {"inputs", p.inputs.to_json()}};
  if (p.ratio) {
    j["ratio"] = p.ratio->report();
    j["ratio"]["relation"] = p.ratio->relation->to_json();
  } else {
    j["ratio"] = {{"error", p.ratio_error}};
  }
  if (p.ratio && p.hull && !p.hull->linear && p.chosen == p.hull->relation)
    j["ratio"]["not_used"] = "the rounds' hulls cross: one line through MinRTT1 and MinRTT2 contradicts them";
  if (p.hull) {
    j["hull"] = p.hull->report();
    if (p.hull->relation) j["hull"]["relation"] = p.hull->relation->to_json();
  }
  if (p.drift)
    j["piecewise"] = {{"max_drift_ppm", double(p.drift->max_drift_ppb()) / 1000},
                      {"rate_interval", {double(p.drift->rates().lo) / 1e9, double(p.drift->rates().hi) / 1e9}},
                      {"kept_constraints", p.drift->kept()}};
  if (p.chosen)
    j["relation"] = p.chosen->to_json();
  else
    j["error"] = p.why_none;
  return j;
}

// The physics check of every node pair's rounds (sync_sanity.h), once per
// unordered pair (the two directions hold the same rounds mirrored). With
// --method ratio, hulls that cross are a finding too: the ratio's one line
// ignores the split.
json check_sync(const std::vector<TranslateNode>& nodes, const PairMap& pairs, Method method,
                std::vector<SyncFinding>& findings) {
  json checks = json::array();
  for (const auto& [k, p] : pairs) {
    if (p.from > p.to || p.rounds.rounds.empty()) continue;
    int64_t xlo = INT64_MAX, xhi = INT64_MIN, ylo = INT64_MAX, yhi = INT64_MIN;
    for (const PairRound& r : p.rounds.rounds) {
      xlo = std::min({xlo, r.x_initiated ? r.t1 : r.t2}), xhi = std::max({xhi, r.x_initiated ? r.t4 : r.t3});
      ylo = std::min({ylo, r.x_initiated ? r.t2 : r.t1}), yhi = std::max({yhi, r.x_initiated ? r.t3 : r.t4});
    }
    SyncCheck c = check_pair_sync(p.rounds.rounds, nodes[p.from].name, nodes[p.to].name,
                                  stream_rate(nodes[p.from].reader->clock_map().points(), xlo, xhi),
                                  stream_rate(nodes[p.to].reader->clock_map().points(), ylo, yhi));
    if (method == Method::Ratio && p.hull && !p.hull->linear)
      c.findings.push_back(crossing_not_split(c.pair, p.hull->segments.size()));
    if (!c.not_checked.empty())
      say("warning: {}: rounds not checked against the clocks' rates: {}", c.pair, c.not_checked);
    if (!c.rate_clock_note.empty()) say("note: {}: {}", c.pair, c.rate_clock_note);
    findings.insert(findings.end(), c.findings.begin(), c.findings.end());
    checks.push_back(c.to_json());
  }
  return checks;
}

RelationPtr choose_relation(Method method, const RelationPtr& ratio, const RelationPtr& hull, bool hull_linear) {
  switch (method) {
    case Method::Ratio:
      return ratio;
    case Method::Hull:
      return hull;
    case Method::Best:
      break;
  }
  if (ratio && hull && !hull_linear) return hull;  // the ratio's one line contradicts crossing hulls: split
  if (ratio && hull) return std::make_shared<IntersectRelation>(ratio, hull);
  return ratio ? ratio : hull;
}

RelationPtr pair_relation(const json& pair, Method method) {
  auto get = [&](const char* m) -> RelationPtr {
    if (!pair.contains(m) || !pair[m].contains("relation")) return nullptr;
    return relation_from_json(pair[m]["relation"]);
  };
  // --clock-model piecewise: the rate-bounded relation replaced the linear methods.
  if (pair.contains("piecewise")) return pair.contains("relation") ? relation_from_json(pair["relation"]) : nullptr;
  // Only the relations `method` can use are read.
  RelationPtr r = method == Method::Hull ? nullptr : get("ratio");
  RelationPtr h = method == Method::Ratio ? nullptr : get("hull");
  return choose_relation(method, r, h, !pair.contains("hull") || pair["hull"].value("linear", true));
}

}  // namespace cptrace
