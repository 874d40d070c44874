// `cptrace throughput`: user events per period per channel, or with --net
// application bytes per period per connection.
#include <memory>

#include <CLI/CLI.hpp>

#include "analyze/throughput.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace cptrace {

SubcommandRunner add_throughput_command(CLI::App& app) {
  auto o = std::make_shared<ThroughputOptions>();
  auto* tput = app.add_subcommand("throughput", "user events per period per channel");
  tput->add_option("dir", o->dir, "trace directory")->required();
  tput->add_option("--channel", o->channel, "only this channel");
  tput->add_option("--period", o->period_ms, "period in ms, aligned to the trace start (default 1000)");
  add_output_flags(tput, o->output, "CSV: period,start_s,channel,events", "JSON: counts per channel");
  tput->add_flag("--net", o->net, "application bytes per period per connection (socket events of record --net)");
  return {tput, [o] { return run_throughput(*o); }};
}

}  // namespace cptrace
