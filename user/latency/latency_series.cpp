// Latency rows of a trace -> the report's latency table.
#include "latency/latency_series.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "latency/latency.h"
#include "translate/translated_run.h"

namespace cptrace {

void check_series_units(const TraceReader& r, const LatencyResult& res) {
  if (!res.have_ns || res.hz <= 0)
    throw std::runtime_error(r.events_path() + ": the " + (is_translated(r) ? "reference " : "") +
                             "TSC frequency is unknown, so durations exist only in ticks (see cptrace latency); the "
                             "report needs them in seconds");
}

std::vector<LatencySeries> latency_series(const TraceReader& r, const std::string& from, const std::string& to,
                                          const MemoryBudget& budget) {
  return latency_series(r, from, to, latency_rows(r, from, to, budget), budget);
}

std::vector<LatencySeries> latency_series(const TraceReader& r, const std::string& from, const std::string& to,
                                          const LatencyResult& res, const MemoryBudget& budget,
                                          const std::function<void(const LatencyRow&)>& also) {
  check_series_units(r, res);
  std::string method = is_translated(r) ? "translated (--method " + res.method + "):"
                                        : "one node's trace: TSC difference / measured frequency, bound = widest "
                                          "correlation bracket or conversion error; scenario:";
  // One series per node pair, all from one read of the rows (which pairs there
  // are, their scenarios, the first pass of their statistics) and one more
  // (SeriesFiller's second pass). Series are numbered as their pairs appear.
  using Key = std::pair<uint16_t, uint16_t>;
  std::map<Key, size_t> number;
  std::vector<std::vector<const char*>> scenarios;  // per number: each scenario name's first pointer
  auto sample = [&](const LatencyRow& row) {
    double at = double(row.from_ref - int64_t(res.ref_origin)) / res.hz;
    // ns are integers: seconds carry them exactly enough for microsecond display.
    return LatencySample{row.tuple, at, double(row.ns) * 1e-9, double(row.ns_lo) * 1e-9, double(row.ns_hi) * 1e-9};
  };
  // The number of a row's node pair: rows of one pair mostly come together.
  Key last{};
  size_t last_number = SIZE_MAX;
  auto number_of = [&](const LatencyRow& row) {
    Key k{row.from_node, row.to_node};
    if (last_number == SIZE_MAX || k != last) last = k, last_number = number.at(k);
    return last_number;
  };
  SeriesFiller filler(budget);
  res.for_each_row([&](const LatencyRow& row) {
    auto [it, added] = number.try_emplace({row.from_node, row.to_node}, number.size());
    if (added) scenarios.emplace_back();
    std::vector<const char*>& seen = scenarios[it->second];
    if (std::find(seen.begin(), seen.end(), row.scenario) == seen.end()) seen.push_back(row.scenario);
    filler.add(it->second, sample(row));
    if (also) also(row);
  });
  std::vector<LatencySeries> out(number.size());  // in node pair order
  std::vector<LatencySeries*> by_number(number.size());
  // Accepted at translate with --accept-suspect-sync: said beside every remote plot.
  // (One node's own trace has no remote series and no findings.)
  const std::optional<TranslatedRun> run = TranslatedRun::of(r.meta());
  const std::vector<SyncFinding> suspect = run ? run->suspect_sync : std::vector<SyncFinding>{};
  size_t at = 0;
  for (const auto& [key, n] : number) {
    LatencySeries& s = out[at++];
    by_number[n] = &s;
    s.from_channel = from, s.to_channel = to;
    s.from_node = res.node_names[key.first], s.to_node = res.node_names[key.second];
    s.remote = key.first != key.second;
    s.method = method;
    std::set<std::string> names(scenarios[n].begin(), scenarios[n].end());
    for (const std::string& sc : names) s.method += " " + sc;
    if (s.remote)
      for (const SyncFinding& f : suspect)
        s.method += ". WARNING suspect sync, bounds through " + f.pair + " NOT guaranteed: " + f.message;
  }
  filler.finish(by_number, [&](const std::function<void(size_t, const LatencySample&)>& fn) {
    res.for_each_row([&](const LatencyRow& row) { fn(number_of(row), sample(row)); });
  });
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
