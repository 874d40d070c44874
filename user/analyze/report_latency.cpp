// Latency rows of a translated trace -> the report's latency table.
#include "analyze/report_latency.h"

#include <algorithm>
#include <map>
#include <set>
#include <functional>
#include <stdexcept>

#include "analyze/local_latency.h"
#include "translate/latency.h"

namespace cptrace {

bool is_translated(const TraceReader& r) { return r.meta().contains("translated"); }

LatencyResult latency_rows(const TraceReader& r, const std::string& from, const std::string& to,
                           const MemoryBudget& budget) {
  return is_translated(r) ? latency_stream(r, from, to, budget) : node_latency_stream(r, from, to, budget);
}

std::vector<LatencySeries> latency_series(const TraceReader& r, const std::string& from, const std::string& to,
                                          const MemoryBudget& budget) {
  LatencyResult res = latency_rows(r, from, to, budget);
  if (!res.have_ns || res.hz <= 0)
    throw std::runtime_error(r.events_path() + ": the " + (is_translated(r) ? "reference " : "") +
                             "TSC frequency is unknown, so durations exist only in ticks (see cptrace latency); the "
                             "report needs them in seconds");
  std::string method = is_translated(r) ? "translated (--method " + res.method + "):"
                                        : "one node's trace: TSC difference / measured frequency, bound = widest "
                                          "correlation bracket or conversion error; scenario:";
  // One series per node pair: which pairs (and their scenarios) there are is one
  // pass over the rows; each series then reads the rows of its pair.
  std::map<std::pair<uint16_t, uint16_t>, std::set<std::string>> scenarios;
  res.for_each_row([&](const LatencyRow& row) { scenarios[{row.from_node, row.to_node}].insert(row.scenario); });
  std::vector<LatencySeries> out;
  for (const auto& [key, names] : scenarios) {
    LatencySeries s;
    s.from_channel = from, s.to_channel = to;
    s.from_node = res.node_names[key.first], s.to_node = res.node_names[key.second];
    s.remote = key.first != key.second;
    s.method = method;
    for (const std::string& sc : names) s.method += " " + sc;
    // Accepted at translate with --accept-suspect-sync: said beside every remote plot.
    if (s.remote)
      for (const auto& f : r.meta()["translated"].value("suspect_sync", nlohmann::json::array()))
        s.method += ". WARNING suspect sync, bounds through " + f.value("pair", "?") +
                    " NOT guaranteed: " + f.value("message", "");
    auto scan = [&, key = key](const std::function<void(const LatencySample&)>& fn) {
      res.for_each_row([&](const LatencyRow& row) {
        if (row.from_node != key.first || row.to_node != key.second) return;
        double at = double(row.from_ref - int64_t(res.ref_origin)) / res.hz;
        // ns are integers: seconds carry them exactly enough for microsecond display.
        fn({row.tuple, at, double(row.ns) * 1e-9, double(row.ns_lo) * 1e-9, double(row.ns_hi) * 1e-9});
      });
    };
    fill_series_stats(s, scan, budget);
    out.push_back(std::move(s));
  }
  // Unmatched and repeated tuple ids belong to the channel pair, not to a node
  // pair: they go on the first series (or an empty one when nothing matched).
  if (out.empty()) {
    LatencySeries s;
    s.from_channel = from, s.to_channel = to, s.method = method;
    if (!is_translated(r)) s.from_node = s.to_node = res.node_names.front();
    out.push_back(s);
  }
  out.front().unmatched_from = res.from_only;
  out.front().unmatched_to = res.to_only;
  out.front().duplicates = res.from_duplicates + res.to_duplicates;
  return out;
}

}  // namespace cptrace
