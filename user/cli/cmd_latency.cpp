// `cptrace latency`: its options; the computation is translate/latency.cpp for
// a translated trace, analyze/local_latency.cpp for one node's own trace (one
// node needs no translation).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "analyze/local_latency.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "translate/latency.h"
#include "translate/sync_sanity.h"

namespace cptrace {

namespace {

struct LatencyArgs {
  std::string dir, from, to;
  bool csv = false, json = false;
  bool accept_suspect_sync = false;
  MemoryBudget budget;
};

int run_latency(const LatencyArgs& a) {
  auto r = open_latency_trace(a.dir);
  if (r->meta().contains("translated"))
    return cmd_latency(*r, a.dir, a.from, a.to, a.csv, a.accept_suspect_sync, a.json, a.budget);
  return print_latency(node_latency_stream(*r, a.from, a.to, a.budget), a.from, a.to, a.csv, a.json, {});
}

}  // namespace

SubcommandRunner add_latency_command(CLI::App& app) {
  auto a = std::make_shared<LatencyArgs>();
  auto* latency = app.add_subcommand("latency", "per-tuple durations between two channels, with bounds");
  latency->add_option("dir", a->dir, "trace directory: translated by cptrace translate, or one node's own")->required();
  latency->add_option("--from", a->from, "channel of the first event")->required();
  latency->add_option("--to", a->to, "channel of the second event")->required();
  latency->add_flag("--csv", a->csv, "one CSV row per tuple instead of the summary");
  latency
      ->add_flag("--json", a->json,
                 "the summary as JSON: count, p50/p90/p99 with strict bounds, bound widths; all, per hop (node "
                 "pair) and per scenario")
      ->excludes(latency->get_option("--csv"));
  latency->add_flag("--accept-suspect-sync", a->accept_suspect_sync,
                    "print bounds of a trace translated with --accept-suspect-sync (default: refuse), with a WARNING "
                    "line per finding");
  add_memory_options(latency, a->budget);
  return {latency, [a] { return run_latency(*a); }};
}

}  // namespace cptrace
