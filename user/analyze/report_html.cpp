// The HTML report: data as JSON, drawn by report_js (an inline script).
#include "analyze/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "latency/local_latency.h"
#include "latency/latency_series.h"
#include "analyze/report_nodes.h"
#include "analyze/report_path.h"
#include "trace/tsc_skew_history.h"
#include "os/out_file.h"
#include "trace/trace_meta.h"
#include "trace/trace_timeline.h"
#include "analyze/clock_adjust_summary.h"
#include "analyze/report_js.h"
#include "os/say.h"
#include "translate/translated_run.h"
#include "netlat/flow_series.h"

namespace cptrace {

using nlohmann::json;

// What the node's bounds rest on, in one line: the clocksource and its reading
// step, the kernel's verdict on the TSC and the skew measured across CPUs, and how
// many correlation segments fell back, by reason (docs/clock.md).
static std::string clock_trust_line(const TraceReader& r) {
  const json& m = r.meta();
  const json cd = m.value("clock_discipline", json::object()), tsc = m.value("tsc", json::object());
  std::string s = fmt::format("Clock: {}", cd.value("clocksource", std::string("clocksource not recorded")));
  if (cd.contains("quantum_ns")) s += fmt::format(", reads in steps of {} ns", cd.value("quantum_ns", uint64_t(1)));
  if (tsc.contains("verdict")) s += fmt::format("; TSC {} ({})", tsc.value("verdict", ""), tsc.value("reason", ""));
  s += fmt::format("; skew across CPUs carried: {} ticks", r.tsc_skew_err());
  TscSkewHistory h = TscSkewHistory::from_meta(m);
  if (h.watched())
    s += fmt::format(" ({} measures while recording, {} CPU interval(s) outside the start and stop ones)", h.periodic,
                     h.moved);
  if (r.clock_map().points().size() >= 2) {
    const ClockModelStats& st = r.clock_map().model_stats();
    s += fmt::format(
        "; kernel stamps: {} of {} segments bounded without the model ({} violated, {} crowded, {} "
        "where CLOCK_MONOTONIC_RAW left its TSC line)",
        st.fallback(), st.segments, st.violated, st.crowded, st.departed);
    if (st.tsc_rate_changes) s += fmt::format("; the TSC changed its rate {} time(s)", st.tsc_rate_changes);
  }
  return s;
}

NodeSection node_section(const TraceReader& r, const Timeline& tl, const Throughput& t) {
  NodeSection n;
  const Counters& c = r.counters();
  uint64_t events = r.event_count();
  n.overview = {{"node", r.trace_meta().node},
                {"host", r.meta().value("/machine/host"_json_pointer, "")},
                {"events", events},
                {"seen", c.total_seen()},
                {"dropped", c.total_dropped()},
                {"accounted", events + c.total_dropped() == c.total_seen()},
                {"span_s", tl.seconds(tl.end)},
                {"tsc_hz", tl.hz},
                {"clock", clock_trust_line(r)},
                {"error", r.error() ? json(r.error()->what()) : json(nullptr)}};
  n.drops = {{"dropped", c.dropped}, {"seen", c.seen}};
  n.throughput = throughput_json(t);
  n.clock = summarize_clock_adjustments(r).to_json();
  return n;
}

double auto_period_ms(const Timeline& tl, size_t max_periods) {
  return auto_period_ms(tl.seconds(tl.end) * 1e3, max_periods);
}

double auto_period_ms(double span_ms, size_t max_periods) {
  for (double p = 1e-3;; p *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (span_ms / (p * m) < double(max_periods)) return p * m;
}

namespace {

json series_json(const LatencySeries& s) {
  return {{"from", s.from_channel},
          {"to", s.to_channel},
          {"from_node", s.from_node},
          {"to_node", s.to_node},
          {"remote", s.remote},
          {"method", s.method},
          {"unmatched_from", s.unmatched_from},
          {"unmatched_to", s.unmatched_to},
          {"duplicates", s.duplicates},
          {"summary", summary_json(s.summary)},
          {"histogram", s.histogram},
          {"cdf", s.cdf},
          {"width_over_time", s.width_over_time},
          {"over_time", s.over_time}};
}

// JSON inside <script>: "</" would end the element.
std::string script_safe(std::string s) {
  for (size_t p = 0; (p = s.find("</", p)) != std::string::npos; p += 3) s.replace(p, 2, "<\\/");
  return s;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace

json report_json(const ReportData& d) {
  json j = {{"title", d.title}, {"nodes", json::array()}, {"latency", json::array()}};
  for (const auto& n : d.nodes)
    j["nodes"].push_back({{"overview", n.overview},
                          {"drops", n.drops},
                          {"throughput", n.throughput},
                          {"clock", n.clock},
                          {"axis", n.axis}});
  for (const auto& s : d.latency) j["latency"].push_back(series_json(s));
  j["path"] = d.path;
  j["run_nodes"] = d.run_nodes;
  j["warnings"] = d.warnings;
  j["flows"] = d.flows;
  return j;
}

namespace {
// Plain HTML, not drawn by the script: what the run lacks is read first, and
// even without JavaScript.
std::string warnings_html(const std::vector<std::string>& w) {
  std::string h;
  for (const std::string& l : w) h += "<p class=\"warn\">" + html_escape(l) + "</p>\n";
  return h;
}
}  // namespace

std::string render_report_html(const ReportData& d) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(d.title) +
      "</title>\n<style>\n" + report_css() + "</style></head>\n<body>\n<h1>" + html_escape(d.title) + "</h1>\n" +
      "<noscript><p class=\"warn\">This report draws its plots with an inline script; enable "
      "JavaScript (no network access is needed).</p></noscript>\n" +
      warnings_html(d.warnings) + "<div id=\"report\"></div>\n<script type=\"application/json\" id=\"cptrace-data\">" +
      script_safe(report_json(d).dump()) + "</script>\n<script>\n" + report_js() + "</script>\n</body></html>\n";
  return h;
}

namespace {

// Whether the path's i-th pair (a hop or the end to end) gets its own plots:
// each is plotted once, as a --pair is, and not again where --pair names it.
bool path_pair_plotted(const ReportOptions& o, const std::vector<ChannelPair>& path, size_t i) {
  const ChannelPair& p = path[i];
  return std::find(o.pairs.begin(), o.pairs.end(), p) == o.pairs.end() &&
         std::find(path.begin(), path.begin() + i, p) == path.begin() + i;
}

// The channel pairs of a translated trace's page: the path's (path_pairs), then
// each --pair. Checked before any is read, with the errors, in the order, that
// reading them one after the other would give.
std::vector<ChannelPair> checked_pairs(const TraceReader& r, const ReportOptions& o) {
  std::vector<ChannelPair> want;
  if (!o.path.empty())
    for (const auto& [from, to] : path_pairs(o.path)) {
      LatencyResult head;
      try {
        head = latency_header(r);
        latency_channel(r, from), latency_channel(r, to);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("--path '" + o.path + "': " + e.what());
      }
      check_hop_units(head);
      want.emplace_back(from, to);
    }
  for (const auto& [from, to] : o.pairs) {
    LatencyResult head = latency_header(r);
    latency_channel(r, from), latency_channel(r, to);
    check_series_units(r, head);
    want.emplace_back(from, to);
  }
  return want;
}

// A node recorded with --net: its meta.json says so (recorded_net_events,
// written when the recorder finished); a trace whose recorder did not finish,
// or without a usable meta.json, is scanned for Net frames.
bool recorded_packets(const std::string& dir) {
  try {
    const TraceMeta m = read_trace_meta(dir);
    if (m.complete) return m.recorded_net_events > 0;
  } catch (const std::exception&) {
  }
  return TraceReader(dir).net_event_count() > 0;
}

// A node recorded with --net-send-calls: its writes and datagrams can be
// measured in the application's view (netlat --writes, the same test).
bool stamped_send_calls(const std::string& dir) {
  try {
    return read_trace_meta(dir).net_send_calls;
  } catch (const std::exception&) {
    return false;
  }
}

json series_array(const std::vector<LatencySeries>& v) {
  json a = json::array();
  for (const LatencySeries& s : v) a.push_back(series_json(s));
  return a;
}

// The nodes' packets, related as `cptrace netlat NODE_DIRS --reference REF`
// relates them (its defaults), and, where the send calls were stamped, the
// application's view as `netlat --writes` gives it: null when no node recorded
// any. A failure to relate them is said on the page, which keeps the rest.
json flows_json(const TranslatedRun& run, const ReportOptions& o, std::vector<std::string>& warnings) {
  if (std::none_of(o.node_dirs.begin(), o.node_dirs.end(), recorded_packets)) return nullptr;
  NetlatOptions n;
  n.relate.dirs = o.node_dirs;
  n.relate.reference = run.reference;
  n.relate.threads = o.budget.threads;
  n.writes = std::any_of(o.node_dirs.begin(), o.node_dirs.end(), stamped_send_calls);
  try {
    FlowReport f = flow_report(n, o.budget);
    return {{"summary", std::move(f.summary)},
            {"series", series_array(f.series)},
            {"write_series", series_array(f.write_series)}};
  } catch (const std::exception& e) {
    warnings.push_back(std::string("flows: the nodes' packets could not be related: ") + e.what());
    return nullptr;
  }
}

// A translated trace holds the events of every node on the reference clock but no
// per-node counters, correlation stream or start instant: node sections come from
// the node directories (report_nodes.h), the latency table from the latency
// command's computation.
void translated_report(const TraceReader& r, const ReportOptions& o, ReportData& d) {
  const TranslatedRun run = TranslatedRun::read(r);
  d.title = "cptrace report: translated onto " + (run.reference.empty() ? "?" : run.reference) + " (--method " +
            (run.method.empty() ? "?" : run.method) + ")";
  if (o.period_ms && o.node_dirs.empty())
    throw std::runtime_error(
        "--period: a translated trace has no throughput of its own (give the nodes' traces with "
        "--node-dir)");
  d.run_nodes = run.node_names;
  std::vector<ChannelPair> want = checked_pairs(r, o);
  // Every channel pair of the page from one read of the trace, each pair's
  // hop or series made as soon as its rows are (latency_streams), within its
  // result's budget, and its rows dropped after.
  const size_t path_count = o.path.empty() ? 0 : path_pairs(o.path).size();
  std::vector<json> hops(path_count);
  // Every hop of the path and its end to end get the plots a --pair gets, once.
  std::vector<std::vector<LatencySeries>> series(want.size());
  const std::vector<ChannelPair> path(want.begin(), want.begin() + path_count);
  auto plotted = [&](size_t i) { return i >= path_count || path_pair_plotted(o, path, i); };
  // An error of the hop or series itself, not of reading the pairs: not
  // prefixed with --path.
  struct FromPage {
    std::exception_ptr e;
  };
  try {
    if (!want.empty())
      latency_streams(r, want, o.budget, [&](size_t i, const LatencyResult& res) {
        try {
          const auto& [from, to] = want[i];
          if (i < path_count && plotted(i)) {
            // A hop with its plots: one read of its rows for both. Their
            // columns, alive together, keep 0.15 of the result's memory each
            // (0.25 and 0.3 alone), the plots' selection 0.15: with the rows'
            // quarter, no more than the plots took alone.
            check_hop_units(res);
            LatencyColumns cols(res, 0.15);
            series[i] =
                latency_series(r, from, to, res, res.budget.share(0.5), [&](const LatencyRow& row) { cols.add(row); });
            hops[i] = path_hop(from, to, res, cols);
          } else if (i < path_count) {
            hops[i] = path_hop(from, to, res);
          } else {
            series[i] = latency_series(r, from, to, res, res.budget);
          }
        } catch (...) {
          throw FromPage{std::current_exception()};
        }
      });
  } catch (const FromPage& f) {
    std::rethrow_exception(f.e);
  } catch (const std::runtime_error& e) {
    if (o.path.empty()) throw;
    throw std::runtime_error("--path '" + o.path + "': " + e.what());
  }
  if (path_count) d.path = path_json(o.path, hops);
  for (auto& s : series)
    for (LatencySeries& one : s) d.latency.push_back(std::move(one));
  if (!o.node_dirs.empty()) d.nodes = run_node_sections(r, o.node_dirs, o.period_ms);
  if (!o.node_dirs.empty()) d.flows = flows_json(run, o, d.warnings);
}

void node_trace_report(const TraceReader& r, const ReportOptions& o, ReportData& d) {
  if (!o.node_dirs.empty()) throw std::runtime_error("--node-dir: only for a translated trace (cptrace translate)");
  for (const auto& [from, to] : o.pairs)
    resolve_channel(r, from), resolve_channel(r, to);  // before the node section's work
  d.title = "cptrace report: " + (r.trace_meta().node.empty() ? o.dir : r.trace_meta().node);
  if (!o.path.empty()) d.path = path_breakdown(r, o.path, o.budget);  // one node needs no translation
  d.nodes.push_back(node_report(r, o.period_ms));
  // The rows of `cptrace latency` on this trace: the page and the command agree.
  // The path's hops and end to end are plotted as a --pair is, once.
  std::vector<ChannelPair> plots;
  const std::vector<ChannelPair> path = o.path.empty() ? std::vector<ChannelPair>{} : path_pairs(o.path);
  for (size_t i = 0; i < path.size(); ++i)
    if (path_pair_plotted(o, path, i)) plots.push_back(path[i]);
  plots.insert(plots.end(), o.pairs.begin(), o.pairs.end());
  for (const auto& [from, to] : plots)
    for (LatencySeries& s : latency_series(r, from, to, o.budget)) d.latency.push_back(std::move(s));
}

}  // namespace

int run_report(const ReportOptions& o) {
  auto r = open_latency_trace(o.dir);  // several nodes' traces: translate first
  ReportData d;
  if (is_translated(*r))
    translated_report(*r, o, d);
  else
    node_trace_report(*r, o, d);
  d.warnings = o.warnings;
  OutFile f(o.out);
  f.write(render_report_html(d));
  f.close();
  std::string nodes;
  for (const auto& n : d.nodes)
    nodes += fmt::format(", node {}: {} channel(s), {} period(s) of {} ms", n.overview.value("node", ""),
                         n.throughput["channels"].size(), n.throughput.value("periods", 0),
                         n.throughput.value("period_ms", 0.0));
  say("wrote {} ({} node section(s){}; {} latency series{})", o.out, d.nodes.size(), nodes, d.latency.size(),
      d.path.is_null() ? "" : fmt::format("; {} hop(s)", d.path["hops"].size()));
  return damaged_trace_exit(*r, "the report covers the events before it");
}

}  // namespace cptrace
