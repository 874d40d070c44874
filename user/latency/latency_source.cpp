// The row source of `latency` and the report: translated or one node's own.
#include "latency/latency_source.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "latency/local_latency.h"
#include "translate/sync_sanity.h"
#include "translate/translated_run.h"
#include "trace/trace_timeline.h"  // open_trace

namespace cptrace {

bool is_translated(const TraceReader& r) { return r.meta().contains("translated"); }

LatencyResult latency_rows(const TraceReader& r, const std::string& from, const std::string& to,
                           const MemoryBudget& budget) {
  return is_translated(r) ? latency_stream(r, from, to, budget) : node_latency_stream(r, from, to, budget);
}

std::unique_ptr<TraceReader> open_latency_trace(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir, ec) && !fs::exists(fs::path(dir) / "events.cpt", ec)) {
    std::vector<std::string> nodes;
    for (const auto& sub : fs::directory_iterator(dir, ec))
      if (fs::exists(sub.path() / "events.cpt", ec)) nodes.push_back(sub.path().filename().string());
    std::sort(nodes.begin(), nodes.end());
    if (!nodes.empty())
      throw std::runtime_error(
          fmt::format("{}: not a translated trace (run cptrace translate first): it holds the "
                      "traces of {} node(s) ({}); one node's trace directory needs no translation",
                      dir, nodes.size(), fmt::join(nodes, ", ")));
  }
  return open_trace(dir);
}

// The findings translate accepted (--accept-suspect-sync): an error unless the
// user accepts them here too.
std::vector<SyncFinding> suspect_findings(const std::string& dir, bool accept) {
  return suspect_findings(TraceReader(dir), dir, accept);
}

std::vector<SyncFinding> suspect_findings(const TraceReader& r, const std::string& dir, bool accept) {
  std::optional<TranslatedRun> run = TranslatedRun::of(r.meta());
  if (!run) return {};
  std::vector<SyncFinding> fs = run->suspect_sync;
  if (!fs.empty() && !accept)
    throw std::runtime_error(suspect_sync_error(fs, dir + " (translated with --accept-suspect-sync)"));
  return fs;
}

}  // namespace cptrace
