// `cptrace report`: a self-contained HTML report (analyze/report_html.cpp).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analyze/report_html.h"
#include "cli/commands.h"

namespace cptrace {

namespace {

struct ReportArgs {
  std::string dir, out;
  std::vector<std::string> pairs;
  double period_ms = 1000;
  CLI::Option* period = nullptr;  // given or not: without it the period is chosen from the trace
};

}  // namespace

SubcommandRunner add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand("report", "self-contained HTML report");
  report->add_option("dir", a->dir, "trace directory (one node's, or translated by cptrace translate)")->required();
  report->add_option("-o,--output", a->out, "HTML file to write")->required();
  report->add_option("--pair", a->pairs, "FROM,TO channel pair for latency plots; repeatable");
  a->period = report->add_option("--period", a->period_ms, "throughput period in ms (default: automatic)");
  return {report, [a] {
            return cmd_report(a->dir, a->out, a->pairs, a->period->count() ? std::optional(a->period_ms) : std::nullopt);
          }};
}

}  // namespace cptrace
