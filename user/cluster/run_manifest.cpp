#include "cluster/run_manifest.h"
#include "os/say.h"

#include <fmt/core.h>

namespace cptrace::cluster {

namespace {

std::string seconds(double s) { return s < 0 ? "?" : fmt::format("{:.1f}", s); }

// What a lost recorder's gap is: when it died and where its events end, on
// the reference's clock when the run was translated, else as the controller saw it.
std::string gap_line(const NodeRun& n, double run_s) {
  const nlohmann::json& e = n.trace_end;
  std::string seen = fmt::format("at +{} s of the {} s run", seconds(n.done_at_s), seconds(run_s));
  std::string l = fmt::format("node {}: recorder killed by signal {} ", n.spec.name, n.done_json.value("signal", 0));
  if (e.contains("killed_s"))
    l += fmt::format("between +{:.3f} and +{:.3f} s", e["killed_s"][0].get<double>(), e["killed_s"][1].get<double>());
  else
    l += seen + " (the controller's clock)";
  if (!e.contains("trace_ends_s"))
    return l + fmt::format("; its trace ends at its last complete frame (byte {}): the events after it are missing{}",
                           n.received, e.contains("killed_s") ? " (" + e.value("clock", std::string()) + ")" : "");
  return l + fmt::format(
                 "; its trace ends at its last complete frame: events on {} after +{:.3f} s (+-{:.3f} ms) are "
                 "missing ({}; the controller saw the loss {})",
                 n.spec.name, e.value("trace_ends_s", 0.0), e.value("trace_ends_err_s", 0.0) * 1e3,
                 e.value("clock", std::string()), seen);
}

}  // namespace

nlohmann::json manifest(const std::string& run_id, const std::string& path, const std::vector<NodeRun>& nodes,
                        double run_s, bool live) {
  nlohmann::json m = {{"run_id", run_id}, {"path", path}, {"nodes", nlohmann::json::array()}};
  for (const NodeRun& n : nodes) {
    nlohmann::json e = to_json(n.spec);
    e["node_dir"] = n.node_dir;
    e["state"] = live ? live_state_of(n) : state_of(n);
    e["events_bytes"] = n.received;
    if (live) {
      m["nodes"].push_back(e);
      continue;
    }
    if (n.done) e["done"] = n.done_json;
    if (n.broke_at_s >= 0)
      e["stream"] = {{"broke_at_s", n.broke_at_s}, {"broke_at_byte", n.broke_at_byte}, {"breaks", n.breaks},
                     {"resumed", n.resumed},       {"resumed_at_s", n.resumed_at_s},   {"gap", !n.complete()}};
    if (n.killed()) {
      e["gap"] = {{"signal", n.done_json.value("signal", 0)}, {"seen_at_s", n.done_at_s}, {"run_s", run_s}};
      if (n.trace_end.is_object()) e["gap"].update(n.trace_end);
    }
    m["nodes"].push_back(e);
  }
  return m;
}

// What happened to each node that is not simply complete, by name: problems
// (`bad` counts those nodes) and the streams that broke and were resumed whole.
std::vector<std::string> node_lines(const std::vector<NodeRun>& nodes, double run_s, int* bad) {
  std::vector<std::string> lines;
  int count = 0;
  for (const NodeRun& n : nodes) {
    std::string s = state_of(n);
    if (s == "complete") {
      if (n.resumed)
        lines.push_back(
            fmt::format("node {}: its stream broke at +{} s (byte {}); resumed from there {}: complete, no gap",
                        n.spec.name, seconds(n.broke_at_s), n.broke_at_byte,
                        n.resumed_at_s >= 0 ? "at +" + seconds(n.resumed_at_s) + " s" : "at the stop"));
      continue;
    }
    count++;
    if (s == "recorder_killed")
      lines.push_back(gap_line(n, run_s));
    else if (s == "recorder_failed")
      lines.push_back(fmt::format("node {}: recorder failed (exit {}: its own error, or its command's status):\n{}",
                                  n.spec.name, n.done_json.value("status", -1),
                                  n.done_json.value("stderr_tail", std::string())));
    else if (n.done && n.done_json.value("running", false))
      lines.push_back(
          fmt::format("node {}: trace incomplete: its recorder still runs (got {} bytes)", n.spec.name, n.received));
    else
      lines.push_back(fmt::format("node {}: trace incomplete: got {} bytes of events.cpt{}{}", n.spec.name, n.received,
                                  n.problem.empty() ? "" : ", " + n.problem,
                                  n.transport_err.empty() ? "" : "; transport: " + tail_lines(n.transport_err, 3)));
  }
  if (bad) *bad = count;
  return lines;
}

int report_nodes(const std::vector<NodeRun>& nodes, double run_s) {
  int bad = 0;
  for (const std::string& l : node_lines(nodes, run_s, &bad)) say("{}", l);
  return bad;
}

}  // namespace cptrace::cluster
