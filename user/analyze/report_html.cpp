// The HTML report: data as JSON, drawn by report_js (an inline script).
#include "analyze/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "analyze/local_latency.h"
#include "analyze/report_latency.h"
#include "trace/out_file.h"
#include "analyze/report_js.h"

namespace cptrace {

using nlohmann::json;

NodeSection node_section(const TraceReader& r, const Timeline& tl, const Throughput& t) {
  NodeSection n;
  const Counters& c = r.counters();
  uint64_t events = r.event_count();
  n.overview = {{"node", r.meta().value("node", "")},
                {"host", r.meta().value("/machine/host"_json_pointer, "")},
                {"events", events},
                {"seen", c.total_seen()},
                {"dropped", c.total_dropped()},
                {"accounted", events + c.total_dropped() == c.total_seen()},
                {"span_s", tl.seconds(tl.end)},
                {"tsc_hz", tl.hz},
                {"error", r.error() ? json(r.error()->what()) : json(nullptr)}};
  n.drops = {{"dropped", c.dropped}, {"seen", c.seen}};
  n.throughput = throughput_json(t);
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

json histogram(const std::vector<double>& sorted, int bins) {
  double lo = sorted.front(), hi = sorted.back();
  if (hi <= lo) return {{"lo_s", lo}, {"hi_s", hi}, {"counts", {sorted.size()}}};
  std::vector<uint64_t> counts(size_t(bins), 0);
  for (double v : sorted) counts[std::min(size_t(bins) - 1, size_t((v - lo) / (hi - lo) * bins))]++;
  return {{"lo_s", lo}, {"hi_s", hi}, {"counts", counts}};
}

// Bound width over time: the widest bound in each of up to `buckets` time slices.
json width_over_time(const LatencySeries& s, size_t buckets) {
  json pts = json::array();
  if (s.samples.empty()) return pts;
  double t0 = s.samples.front().at_s, t1 = s.samples.back().at_s;  // sorted by at_s
  double step = t1 > t0 ? (t1 - t0) / double(buckets) : 1;
  size_t i = 0;
  while (i < s.samples.size()) {
    size_t b = std::min(buckets - 1, size_t((s.samples[i].at_s - t0) / step));
    double widest = 0, at = s.samples[i].at_s;
    for (; i < s.samples.size() && std::min(buckets - 1, size_t((s.samples[i].at_s - t0) / step)) == b; ++i)
      widest = std::max(widest, s.samples[i].hi_s - s.samples[i].lo_s);
    pts.push_back({at, widest});
  }
  return pts;
}

json series_json(const LatencySeries& s) {
  std::vector<LatencySample> sorted_by_time = s.samples;
  std::sort(sorted_by_time.begin(), sorted_by_time.end(),
            [](const LatencySample& a, const LatencySample& b) { return a.at_s < b.at_s; });
  LatencySeries tmp = s;
  tmp.samples = std::move(sorted_by_time);
  std::vector<double> v;
  for (const auto& x : s.samples) v.push_back(x.value_s);
  std::sort(v.begin(), v.end());
  return {{"from", s.from_channel},
          {"to", s.to_channel},
          {"from_node", s.from_node},
          {"to_node", s.to_node},
          {"remote", s.remote},
          {"method", s.method},
          {"unmatched_from", s.unmatched_from},
          {"unmatched_to", s.unmatched_to},
          {"duplicates", s.duplicates},
          {"summary", summary_json(summarize(s))},
          {"histogram", v.empty() ? json(nullptr) : histogram(v, 40)},
          {"width_over_time", width_over_time(tmp, 200)}};
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
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

}  // namespace

json report_json(const ReportData& d) {
  json j = {{"title", d.title}, {"nodes", json::array()}, {"latency", json::array()}};
  for (const auto& n : d.nodes)
    j["nodes"].push_back({{"overview", n.overview}, {"drops", n.drops}, {"throughput", n.throughput}});
  for (const auto& s : d.latency) j["latency"].push_back(series_json(s));
  return j;
}

std::string render_report_html(const ReportData& d) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                  html_escape(d.title) + "</title>\n<style>\n" + report_css() + "</style></head>\n<body>\n<h1>" +
                  html_escape(d.title) + "</h1>\n" +
                  "<noscript><p class=\"warn\">This report draws its plots with an inline script; enable "
                  "JavaScript (no network access is needed).</p></noscript>\n"
                  "<div id=\"report\"></div>\n<script type=\"application/json\" id=\"cptrace-data\">" +
                  script_safe(report_json(d).dump()) + "</script>\n<script>\n" + report_js() + "</script>\n</body></html>\n";
  return h;
}

namespace {

std::pair<std::string, std::string> split_pair(const std::string& p) {
  auto comma = p.find(',');
  if (comma == std::string::npos || comma == 0 || comma + 1 == p.size())
    throw std::runtime_error("--pair '" + p + "': expected FROM,TO (two channel names)");
  return {p.substr(0, comma), p.substr(comma + 1)};
}

// A translated trace holds the events of every node on the reference clock but no
// per-node counters, correlation stream or start instant: no node sections (run
// the report on each node's own trace for throughput and drops), and the latency
// table comes from the latency command's computation.
void translated_report(const TraceReader& r, const std::vector<std::string>& pairs, ReportData& d) {
  d.title = "cptrace report: translated onto " + r.meta()["translated"].value("reference", "?") + " (--method " +
            r.meta()["translated"].value("method", "?") + ")";
  for (const auto& p : pairs) {
    auto [from, to] = split_pair(p);
    for (LatencySeries& s : translated_latency_series(r, from, to)) d.latency.push_back(std::move(s));
  }
}

}  // namespace

int cmd_report(const std::string& dir, const std::string& out, const std::vector<std::string>& pairs,
               std::optional<double> period) {
  auto r = open_trace(dir);
  ReportData d;
  size_t channels = 0, periods = 0;
  double period_ms = 0;
  if (is_translated(*r)) {
    if (period) throw std::runtime_error("--period: a translated trace has no throughput section (report each node's trace)");
    translated_report(*r, pairs, d);
  } else {
    Timeline tl = trace_timeline(*r);
    std::vector<std::pair<uint64_t, uint64_t>> ids;
    for (const auto& p : pairs) {
      auto [from, to] = split_pair(p);
      ids.emplace_back(resolve_channel(*r, from), resolve_channel(*r, to));
    }
    period_ms = period ? *period : auto_period_ms(tl);
    Throughput t;
    try {
      t = compute_throughput(*r, tl, period_ticks(tl, period_ms, "--period"), period_ms);
    } catch (const TooManyPeriods& e) {
      if (period) throw;
      // Events stamped far outside the recording: an automatic period covers them too.
      period_ms = auto_period_ms(e.span_ms);
      fprintf(stderr, "cptrace report: %s; throughput periods of %g ms instead\n", e.what(), period_ms);
      t = compute_throughput(*r, tl, period_ticks(tl, period_ms, "--period"), period_ms);
    }
    d.title = "cptrace report: " + r->meta().value("node", dir);
    d.nodes.push_back(node_section(*r, tl, t));
    for (auto [a, b] : ids) d.latency.push_back(same_node_latency(*r, tl, a, b));
    channels = t.channels.size(), periods = t.periods;
  }
  OutFile f(out);
  f.write(render_report_html(d));
  f.close();
  fprintf(stderr, "cptrace report: wrote %s (%zu channel(s), %zu period(s) of %g ms, %zu latency series)\n",
          out.c_str(), channels, periods, period_ms, d.latency.size());
  if (r->error()) {
    fprintf(stderr, "cptrace report: %s (the report covers the events before it)\n", r->error()->what());
    return 2;
  }
  return 0;
}

}  // namespace cptrace
