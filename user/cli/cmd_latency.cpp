// `cptrace latency`: its options; the command is run_latency
// (latency/latency_command.h), for a translated trace or one node's own.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "tables/output_form.h"
#include "latency/latency_command.h"

namespace cptrace {

SubcommandRunner add_latency_command(CLI::App& app) {
  auto a = std::make_shared<LatencyOptions>();
  auto* latency = app.add_subcommand("latency", "per-tuple durations between two channels, with bounds");
  latency->add_option("dir", a->dir, "trace directory: translated by cptrace translate, or one node's own")->required();
  latency->add_option("--from", a->from, "channel of the first event")->required();
  latency->add_option("--to", a->to, "channel of the second event")->required();
  add_output_flags(latency, a->output, "one CSV row per tuple instead of the summary",
                   "the summary as JSON: count, p50/p90/p99 with strict bounds, bound widths; all, per hop (node "
                   "pair) and per scenario");
  latency->add_flag("--accept-suspect-sync", a->accept_suspect_sync,
                    "print bounds of a trace translated with --accept-suspect-sync (default: refuse), with a WARNING "
                    "line per finding");
  add_memory_options(latency, a->budget);
  return {latency, [a] { return run_latency(*a); }};
}

}  // namespace cptrace
