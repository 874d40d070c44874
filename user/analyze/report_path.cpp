// Per-hop latency percentiles of a pipeline path, for the report.
#include "analyze/report_path.h"

#include <stdexcept>

#include "latency/latency_series.h"
#include "latency/latency.h"
#include "latency/latency_summary.h"

namespace cptrace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    size_t comma = path.find(',', at);
    out.push_back(path.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (out.back().empty()) throw std::runtime_error("--path '" + path + "': an empty channel name");
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (out.size() < 2)
    throw std::runtime_error("--path '" + path + "': expected at least two channels (FROM,...,TO), got one");
  return out;
}

std::vector<ChannelPair> path_pairs(const std::string& path) {
  std::vector<std::string> ch = split_path(path);
  std::vector<ChannelPair> out;
  for (size_t i = 0; i + 1 < ch.size(); ++i) out.emplace_back(ch[i], ch[i + 1]);
  out.emplace_back(ch.front(), ch.back());
  return out;
}

void check_hop_units(const LatencyResult& res) {
  // Ticks of one hop beside ns of another would be silently wrong: refuse.
  if (!res.have_ns)
    throw std::runtime_error(
        "--path: the TSC frequency is unknown, so durations exist only in ticks "
        "(see cptrace latency)");
}

nlohmann::json path_hop(const std::string& from, const std::string& to, const LatencyResult& res) {
  check_hop_units(res);
  return path_hop(from, to, res, LatencyColumns(res));
}

nlohmann::json path_hop(const std::string& from, const std::string& to, const LatencyResult& res,
                        const LatencyColumns& cols) {
  check_hop_units(res);
  // The "all" group of `latency --json`: the same numbers, by the same code.
  nlohmann::json sum = latency_summary_json(res, from, to, cols);
  nlohmann::json h = {{"from", from}, {"to", to}, {"unit", sum["unit"]}};
  h.update(sum["all"]);
  return h;
}

nlohmann::json path_breakdown(const TraceReader& r, const std::string& path, const MemoryBudget& budget) {
  std::vector<ChannelPair> pairs = path_pairs(path);
  std::vector<nlohmann::json> hops;
  for (const auto& [from, to] : pairs) {
    LatencyResult res;
    try {
      res = latency_rows(r, from, to, budget);  // one node's trace too
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("--path '" + path + "': " + e.what());
    }
    hops.push_back(path_hop(from, to, res));
  }
  return path_json(path, hops);
}

nlohmann::json path_breakdown(const std::string& path, const std::vector<LatencyResult>& rows) {
  std::vector<ChannelPair> pairs = path_pairs(path);
  std::vector<nlohmann::json> hops;
  for (size_t i = 0; i < pairs.size(); ++i) hops.push_back(path_hop(pairs[i].first, pairs[i].second, rows.at(i)));
  return path_json(path, hops);
}

nlohmann::json path_json(const std::string& path, const std::vector<nlohmann::json>& hops) {
  nlohmann::json j = {{"channels", split_path(path)}, {"hops", nlohmann::json::array()}};
  for (size_t i = 0; i + 1 < hops.size(); ++i) j["hops"].push_back(hops[i]);
  j["end_to_end"] = hops.back();
  return j;
}

}  // namespace cptrace
