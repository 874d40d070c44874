#include "cluster/run_finish.h"

#include <cstdio>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "analyze/report_html.h"
#include "analyze/report_path.h"
#include "cluster/run_manifest.h"
#include "cluster/trace_ends.h"
#include "trace/trace_reader.h"
#include "translate/translate.h"
#include "translate/translate_summary.h"
#include "os/say.h"

namespace cptrace::cluster {

namespace {

void print_path_summary(const std::string& translated, const std::string& path) {
  TraceReader r(translated);
  nlohmann::json b = path_breakdown(r, path);
  auto row = [](const std::string& label, const nlohmann::json& h) {
    const nlohmann::json& g = h.contains("all") ? h["all"] : h;
    std::string unit = h.value("unit", std::string("ns"));
    std::string line = fmt::format("  {:<28} n={:<7}", label, g.value("count", uint64_t(0)));
    for (const char* p : {"p50", "p90", "p99"})
      if (g.contains(p))
        line += fmt::format(" {} {} [{}, {}]", p, g[p].dump(), g.value(std::string(p) + "_lo", nlohmann::json()).dump(),
                            g.value(std::string(p) + "_hi", nlohmann::json()).dump());
    fmt::print("{} {}\n", line, unit);
  };
  fmt::print("per-hop latency (true percentile within [lo, hi]):\n");
  for (const auto& h : b["hops"]) row(h.value("from", std::string()) + " -> " + h.value("to", std::string()), h);
  if (b.contains("end_to_end")) row("end to end", b["end_to_end"]);
}

}  // namespace

int finish_run(const std::string& run, const std::string& path, std::vector<NodeRun>& nodes, double run_s) {
  TranslateOptions t;
  for (const NodeRun& n : nodes)
    if (n.complete() || (!n.meta.empty() && n.received > 0)) t.dirs.push_back(n.local);
  if (t.dirs.empty() || nodes.empty() || !nodes[0].complete()) {
    say("the reference node {} has no complete trace: not translated", nodes.empty() ? "?" : nodes[0].spec.name);
    return 1;
  }
  t.reference = nodes[0].spec.name;
  t.out = run + "/translated";
  t.overwrite = true;
  int st = run_translate(t);
  fflush(stdout);  // its lines before the report's (stderr)
  if (st != 0) return st;
  locate_trace_ends(t.out, nodes);
  if (!path.empty()) {
    print_path_summary(t.out, path);
    ReportOptions ro;
    ro.dir = t.out;
    ro.out = run + "/report.html";
    ro.node_dirs = t.dirs;
    ro.path = path;
    ro.warnings = node_lines(nodes, run_s);
    st = run_report(ro);
    fmt::print("report: {}\n", ro.out);
  }
  fmt::print("translated run: {}\n", t.out);
  return st;
}

}  // namespace cptrace::cluster
