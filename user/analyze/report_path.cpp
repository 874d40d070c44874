// Per-hop latency percentiles of a pipeline path, for the report.
#include "analyze/report_path.h"

#include <stdexcept>

#include "analyze/report_latency.h"
#include "translate/latency.h"
#include "translate/latency_summary.h"

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

namespace {

nlohmann::json hop(const TraceReader& r, const std::string& path, const std::string& from, const std::string& to,
                   const MemoryBudget& budget) {
  LatencyResult res;
  try {
    res = latency_rows(r, from, to, budget);  // one node's trace too
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("--path '" + path + "': " + e.what());
  }
  // Ticks of one hop beside ns of another would be silently wrong: refuse.
  if (!res.have_ns)
    throw std::runtime_error(
        "--path: the TSC frequency is unknown, so durations exist only in ticks "
        "(see cptrace latency)");
  // The "all" group of `latency --json`: the same numbers, by the same code.
  nlohmann::json sum = latency_summary_json(res, from, to);
  nlohmann::json h = {{"from", from}, {"to", to}, {"unit", sum["unit"]}};
  h.update(sum["all"]);
  return h;
}

}  // namespace

nlohmann::json path_breakdown(const TraceReader& r, const std::string& path, const MemoryBudget& budget) {
  std::vector<std::string> ch = split_path(path);
  nlohmann::json j = {{"channels", ch}, {"hops", nlohmann::json::array()}};
  for (size_t i = 0; i + 1 < ch.size(); ++i) j["hops"].push_back(hop(r, path, ch[i], ch[i + 1], budget));
  j["end_to_end"] = hop(r, path, ch.front(), ch.back(), budget);
  return j;
}

}  // namespace cptrace
