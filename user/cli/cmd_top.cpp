// `cptrace top`: live view of a recording in progress.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analyze/top.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace cptrace {

namespace {

struct TopArgs {
  TopOptions o;
  std::vector<std::string> pairs;  // --pair as typed
};

}  // namespace

SubcommandRunner add_top_command(CLI::App& app) {
  auto a = std::make_shared<TopArgs>();
  TopOptions* o = &a->o;
  auto* top = app.add_subcommand("top", "live view of a recording: events/s per channel, drops, latency");
  top->add_option("dir", o->dir,
                  "trace directory being recorded, or a run directory of one per node (waited for, see --wait)")
      ->required();
  top->add_option("--interval", o->interval_ms, "refresh every MS milliseconds (default 1000)");
  top->add_option("--period", o->period_ms, "throughput period in ms, aligned to the trace start (default 1000)");
  add_pair_option(top, a->pairs,
                  "FROM,TO: latency percentiles of this channel pair (repeatable; in a run FROM and TO may be on "
                  "different nodes, with strict bounds)",
                  "--pairs", true);
  top->add_option("--reference", o->reference, "run: the node whose TSC durations are measured on (default: first)");
  top->add_option("--max-drift-ppm", o->max_drift_ppm,
                  "run: bound on one node's clock rate against another's, as translate --clock-model piecewise "
                  "(default 500)");
  top->add_flag("--flows", o->flows,
                "run: one-way delay of every flow between the nodes (recorded with record --net), per direction, "
                "with strict bounds, as netlat");
  top->add_option("--iterations", o->iterations, "stop after N refreshes (default: when the recording ends)")
      ->check(CLI::PositiveNumber);
  top->add_option("--wait", o->wait_s, "seconds to wait for DIR and its events.cpt to appear (default 10)");
  top->add_option("--gone-after", o->gone_s,
                  "seconds without growth of events.cpt after which the recorder counts as gone (default 5)");
  add_memory_options(top, o->budget);
  top->add_flag("--json,--batch", o->json, "one JSON object per refresh, no terminal control codes");
  return {top, [a] {
            a->o.pairs = channel_pairs(a->pairs);
            return run_top(a->o);
          }};
}

}  // namespace cptrace
