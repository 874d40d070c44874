// `cptrace report`: one self-contained HTML page (no network: the data is an
// inline JSON block, the plots are SVG drawn by a small inline script).
//
// The page opens with what people come for: a pipeline path's end-to-end line
// and per-hop table with bounds, and the table of the latency pairs; then one
// section per node; then the plots behind the latency numbers.
//
// The page is built from a ReportData, which the caller fills:
//   - one NodeSection per node trace (overview, drops per CPU or one line when
//     nothing was dropped, throughput; a translated run's nodes on one shared
//     time axis, the reference's);
//   - the latency table (latency_table.h): LatencySeries per channel pair (and
//     node pair), filled by latency/latency_series.h, each drawn as a box plot
//     with the range its bounds reach, a histogram, a CDF on a log time axis,
//     and its bound width over time grouped by node pair;
//   - optionally a pipeline path's per-hop breakdown (report_path.h);
//   - a translated run's flows when its nodes' traces hold packets: per flow
//     and direction the one-way delays `cptrace netlat` gives, drawn as the
//     latency series are.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/latency_table.h"
#include "analyze/throughput.h"
#include "trace/channel_pair.h"
#include "tables/memory_budget.h"

namespace cptrace {

struct NodeSection {
  nlohmann::json overview;  // node, host, events, seen, dropped, accounted, span_s, tsc_hz, error
  nlohmann::json drops;  // {"dropped":[per cpu], "seen":[per cpu]}
  nlohmann::json throughput;  // throughput_json()
  nlohmann::json clock;  // ClockAdjustSummary::to_json(): NTP state at start, adjustments seen
  // A translated run's node: its seconds on the reference's axis, reference
  // seconds = offset_s + scale * own seconds ({"reference", "offset_s",
  // "scale"}), so that every node's throughput plot shares one time axis; null
  // for one node's own report.
  nlohmann::json axis;
};

struct ReportData {
  std::string title;
  std::vector<NodeSection> nodes;
  std::vector<LatencySeries> latency;
  nlohmann::json path;  // path_breakdown(), or null
  std::vector<std::string> run_nodes;  // a translated run's nodes (a note when their sections are missing)
  std::vector<std::string> warnings;  // shown first: what the run lacks (a node lost mid-run, ...)
  // The nodes' packets (`record --net`, given with --node-dir): `netlat --json`'s
  // summary and one series per flow and direction (netlat/flow_series.h).
  nlohmann::json flows;  // {"summary": ..., "series": [...]}, or null
};

struct ReportOptions {
  std::string dir, out;
  std::vector<ChannelPair> pairs;  // --pair: latency plots of these channel pairs
  std::optional<double> period_ms;  // none: auto_period_ms()
  std::vector<std::string> node_dirs;  // translated DIR: the nodes' own traces
  std::string path;  // translated DIR: "A,B,C,..." per-hop breakdown
  MemoryBudget budget;  // for the latency rows (--memory, --temp-dir)
  std::vector<std::string> warnings;  // ReportData::warnings (`cluster record`: each node's gap)
};

NodeSection node_section(const TraceReader& r, const Timeline& tl, const Throughput& t);
// A period (ms) of 1, 2 or 5 times a power of ten giving at most `max_periods` periods.
double auto_period_ms(const Timeline& tl, size_t max_periods = 300);
// The same for a span of `span_ms` milliseconds.
double auto_period_ms(double span_ms, size_t max_periods = 300);
// The JSON embedded in the page (exposed for tests).
nlohmann::json report_json(const ReportData& d);
std::string render_report_html(const ReportData& d);

// DIR: one node's trace (node section + same-node latency) or a translated trace
// (latency rows of `cptrace latency`; node sections from node_dirs, per-hop
// breakdown of path).
int run_report(const ReportOptions& o);

}  // namespace cptrace
