// The summary of `cptrace latency`: nearest-rank percentiles and their bounds.
#include "translate/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace cptrace {

int64_t nearest_rank(std::vector<int64_t>& v, double p) {
  size_t k = std::min(v.size() - 1, size_t(std::ceil(p * double(v.size()))) - (p > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

void LatencyGroup::add(const LatencyRow& r, bool ns) {
  value.push_back(ns ? r.ns : r.ticks);
  lo.push_back(ns ? r.ns_lo : r.ticks_lo);
  hi.push_back(ns ? r.ns_hi : r.ticks_hi);
}

nlohmann::json group_json(LatencyGroup g) {
  nlohmann::json j{{"count", g.value.size()}};
  if (g.value.empty()) return j;
  std::vector<int64_t> width(g.value.size());
  for (size_t i = 0; i < width.size(); ++i) width[i] = g.hi[i] - g.lo[i];
  j["min"] = nearest_rank(g.value, 0);
  for (auto [name, p] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}) {
    j[name] = nearest_rank(g.value, p);
    j[std::string(name) + "_lo"] = nearest_rank(g.lo, p);
    j[std::string(name) + "_hi"] = nearest_rank(g.hi, p);
    j["width_" + std::string(name)] = nearest_rank(width, p);
  }
  j["max"] = nearest_rank(g.value, 1.0);
  j["width_max"] = nearest_rank(width, 1.0);
  return j;
}

nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to) {
  LatencyGroup all;
  std::map<std::pair<uint16_t, uint16_t>, LatencyGroup> hops;
  std::map<std::string, LatencyGroup> scenarios;
  for (const LatencyRow& r : res.rows) {
    all.add(r, res.have_ns);
    hops[{r.from_node, r.to_node}].add(r, res.have_ns);
    scenarios[r.scenario].add(r, res.have_ns);
  }
  nlohmann::json j{{"from", from},
                   {"to", to},
                   {"unit", res.have_ns ? "ns" : "ticks"},
                   {"from_only", res.from_only},
                   {"to_only", res.to_only},
                   {"from_duplicates", res.from_duplicates},
                   {"to_duplicates", res.to_duplicates},
                   {"all", group_json(std::move(all))},
                   {"hops", nlohmann::json::array()},
                   {"scenarios", nlohmann::json::array()}};
  for (auto& [nodes, g] : hops) {
    nlohmann::json h{{"from_node", res.node_names[nodes.first]}, {"to_node", res.node_names[nodes.second]}};
    h.update(group_json(std::move(g)));
    j["hops"].push_back(h);
  }
  for (auto& [name, g] : scenarios) {
    nlohmann::json s{{"scenario", name}};
    s.update(group_json(std::move(g)));
    j["scenarios"].push_back(s);
  }
  return j;
}

}  // namespace cptrace
