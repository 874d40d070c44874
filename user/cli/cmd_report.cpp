// `cptrace report`: a self-contained HTML report (analyze/report_html.cpp).
#include <malloc.h>

#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analyze/report_html.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace cptrace {

namespace {

// The report joins its channel pairs one after another, each in memory the
// size of what the previous pair freed. Given back to the kernel, that memory
// comes back zeroed page by page: a fifth of the CPU of a three-hop path at 2 M
// tuples on a 2-vCPU VM. So this process's allocator keeps it (large blocks
// from its own heap, not mmap, and no trimming) and the next pair reuses the
// same pages: the peak RSS stays that of the largest pair, as before.
void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

struct ReportArgs {
  ReportOptions o;
  std::vector<std::string> pairs;  // --pair as typed
  double period_ms = 1000;
  CLI::Option* period = nullptr;  // given or not: without it the period is chosen from the trace
};

}  // namespace

SubcommandRunner add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand("report", "self-contained HTML report");
  report->add_option("dir", a->o.dir, "trace directory (one node's, or translated by cptrace translate)")->required();
  report->add_option("-o,--output", a->o.out, "HTML file to write")->required();
  add_pair_option(report, a->pairs, "FROM,TO channel pair for latency plots; repeatable");
  a->period = report->add_option("--period", a->period_ms, "throughput period in ms (default: automatic)");
  report->add_option("--node-dir", a->o.node_dirs,
                     "translated DIR: a node's own trace directory, for its throughput and drops; one per node");
  report->add_option("--path", a->o.path,
                     "channels of a pipeline path A,B,C,...: per-hop and end-to-end p50/p90/p99 with bounds");
  add_memory_options(report, a->o.budget);
  return {report, [a] {
            a->o.pairs = channel_pairs(a->pairs);
            if (a->period->count()) a->o.period_ms = a->period_ms;
            keep_freed_memory();
            return run_report(a->o);
          }};
}

}  // namespace cptrace
