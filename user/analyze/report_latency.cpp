// Latency rows of a translated trace -> the report's latency table.
#include "analyze/report_latency.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "translate/latency.h"

namespace cptrace {

bool is_translated(const TraceReader& r) { return r.meta().contains("translated"); }

std::vector<LatencySeries> translated_latency_series(const TraceReader& r, const std::string& from,
                                                     const std::string& to) {
  LatencyResult res = latency(r, from, to);
  if (!res.have_ns || res.hz <= 0)
    throw std::runtime_error(r.events_path() + ": the reference TSC frequency is unknown, so durations exist only in "
                             "ticks (see cptrace latency); the report needs them in seconds");
  // Keyed by node pair; the series keep the order of the rows inside each pair.
  std::map<std::pair<uint16_t, uint16_t>, LatencySeries> by_nodes;
  std::map<std::pair<uint16_t, uint16_t>, std::set<std::string>> scenarios;
  for (const LatencyRow& row : res.rows) {
    auto key = std::pair{row.from_node, row.to_node};
    LatencySeries& s = by_nodes[key];
    scenarios[key].insert(row.scenario);
    double at = double(row.from_ref - int64_t(res.ref_origin)) / res.hz;
    // ns are integers: seconds carry them exactly enough for microsecond display.
    s.samples.push_back({row.tuple, at, double(row.ns) * 1e-9, double(row.ns_lo) * 1e-9, double(row.ns_hi) * 1e-9});
  }
  std::vector<LatencySeries> out;
  for (auto& [key, s] : by_nodes) {
    s.from_channel = from, s.to_channel = to;
    s.from_node = res.node_names[key.first], s.to_node = res.node_names[key.second];
    s.remote = key.first != key.second;
    s.method = "translated (--method " + res.method + "):";
    for (const std::string& sc : scenarios[key]) s.method += " " + sc;
    // Accepted at translate with --accept-suspect-sync: said beside every remote plot.
    if (s.remote)
      for (const auto& f : r.meta()["translated"].value("suspect_sync", nlohmann::json::array()))
        s.method += ". WARNING suspect sync, bounds through " + f.value("pair", "?") + " NOT guaranteed: " +
                    f.value("message", "");
    std::sort(s.samples.begin(), s.samples.end(),
              [](const LatencySample& x, const LatencySample& y) { return x.at_s < y.at_s; });
    out.push_back(std::move(s));
  }
  // Unmatched and repeated tuple ids belong to the channel pair, not to a node
  // pair: they go on the first series (or an empty one when nothing matched).
  if (out.empty()) {
    LatencySeries s;
    s.from_channel = from, s.to_channel = to, s.method = "translated (--method " + res.method + ")";
    out.push_back(s);
  }
  out.front().unmatched_from = res.from_only;
  out.front().unmatched_to = res.to_only;
  out.front().duplicates = res.from_duplicates + res.to_duplicates;
  return out;
}

}  // namespace cptrace
