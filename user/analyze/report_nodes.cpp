// Node sections of the report, from node trace directories.
#include "analyze/report_nodes.h"

#include <cstdio>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "latency/latency_series.h"
#include "analyze/throughput.h"
#include "trace/trace_timeline.h"
#include "translate/clock_relation.h"
#include "os/say.h"

namespace cptrace {

NodeSection node_report(const TraceReader& r, std::optional<double> period) {
  Timeline tl = trace_timeline(r);
  double period_ms = period ? *period : auto_period_ms(tl);
  Throughput t;
  try {
    t = compute_throughput(r, tl, period_ticks(tl, period_ms, "--period"), period_ms);
  } catch (const TooManyPeriods& e) {
    if (period) throw;
    // Events stamped far outside the recording: an automatic period covers them too.
    period_ms = auto_period_ms(e.span_ms);
    say("{}; throughput periods of {:g} ms instead", e.what(), period_ms);
    t = compute_throughput(r, tl, period_ticks(tl, period_ms, "--period"), period_ms);
  }
  return node_section(r, tl, t);
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

// Where node v's own seconds (since its trace start) fall on the reference's
// (since the reference's trace start, as the latency plots count them): its
// start and end through its relation to the reference, a line between them
// (the relation's curvature is ppm, far below a pixel).
nlohmann::json reference_axis(const TraceReader& run, size_t v, const NodeSection& s) {
  const nlohmann::json& tr = run.meta()["translated"];
  const nlohmann::json& node = tr["nodes"][v];
  std::string ref = tr.value("reference", "");
  int64_t ref_origin = 0;
  double ref_hz = tr.value("/frequency/hz"_json_pointer, 0.0);
  for (const auto& n : tr["nodes"])
    if (n.value("node", "") == ref) {
      ref_origin = n["span_tsc"][0].get<int64_t>();
      if (ref_hz <= 0) ref_hz = n.value("tsc_hz_stream", 0.0);
    }
  double hz = s.overview.value("tsc_hz", 0.0), span_s = s.overview.value("span_s", 0.0);
  if (ref_hz <= 0 || hz <= 0) return nullptr;
  try {
    RelationPtr to_ref = relation_from_json(node.at("to_reference"));
    int64_t origin = s.throughput.value("origin_tsc", int64_t(0));
    auto on_ref = [&](int64_t t) { return double(to_ref->at(t).est - ref_origin) / ref_hz; };
    double a = on_ref(origin), b = 1;
    if (span_s > 0) b = (on_ref(origin + int64_t(span_s * hz)) - a) / span_s;
    return {{"reference", ref}, {"offset_s", a}, {"scale", b}};
  } catch (const std::exception& e) {
    // A relation with no estimate there: this node keeps its own axis (and the
    // plots theirs), which the page says by its axis label.
    say("node {}: no place on {}'s time axis ({}); its plots keep their own", node.value("node", ""), ref, e.what());
    return nullptr;
  }
}

std::vector<NodeSection> run_node_sections(const TraceReader& run, const std::vector<std::string>& node_dirs,
                                           std::optional<double> period) {
  const nlohmann::json& nodes = run.meta()["translated"]["nodes"];
  std::vector<std::string> names;
  for (const auto& n : nodes) names.push_back(n.value("node", ""));
  std::map<size_t, NodeSection> by_index;
  for (const std::string& d : node_dirs) {
    auto r = open_trace(d);
    if (is_translated(*r)) throw std::runtime_error("--node-dir " + d + ": a translated trace, not a node's own trace");
    std::string name = r->trace_meta().node;
    size_t v = 0;
    while (v < names.size() && names[v] != name) ++v;
    if (v == names.size())
      throw std::runtime_error(fmt::format(
          "--node-dir {}: node '{}' is not a node of the translated run (its nodes: {})", d, name, joined(names)));
    if (by_index.count(v)) throw std::runtime_error("--node-dir " + d + ": node '" + name + "' given twice");
    // The same name but another recording would put foreign numbers beside the run's latencies.
    uint64_t want = nodes[v].value("events", uint64_t(0));
    if (r->event_count() != want)
      throw std::runtime_error(
          fmt::format("--node-dir {}: holds {} events, but the run translated {} of node '{}': "
                      "not the trace the run was made from",
                      d, r->event_count(), want, name));
    by_index[v] = node_report(*r, period);
  }
  std::vector<std::string> missing;
  for (size_t v = 0; v < names.size(); ++v)
    if (!by_index.count(v)) missing.push_back(names[v]);
  if (!missing.empty())
    throw std::runtime_error(fmt::format("--node-dir: no directory for node(s) {} of the run (give one per node: {})",
                                         joined(missing), joined(names)));
  std::vector<NodeSection> out;
  for (auto& [v, s] : by_index) {
    s.axis = reference_axis(run, v, s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cptrace
