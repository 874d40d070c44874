// `cptrace throughput`: user events per period per channel, or with --net
// application bytes per period per connection.
#include <memory>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "analyze/net_throughput.h"
#include "analyze/throughput.h"
#include "cli/commands.h"

namespace cptrace {

namespace {

struct ThroughputArgs {
  std::string dir, channel;
  double period_ms = 1000;
  bool csv = false, json = false, net = false;
};

int run_throughput(const ThroughputArgs& a) {
  if (a.net) {
    // Network series are per connection, not per channel: there is nothing to select.
    if (!a.channel.empty()) throw std::runtime_error("--net and --channel exclude each other");
    return cmd_net_throughput(a.dir, a.period_ms, a.csv, a.json);
  }
  return cmd_throughput(a.dir, a.channel, a.period_ms, a.csv, a.json);
}

}  // namespace

SubcommandRunner add_throughput_command(CLI::App& app) {
  auto a = std::make_shared<ThroughputArgs>();
  auto* tput = app.add_subcommand("throughput", "user events per period per channel");
  tput->add_option("dir", a->dir, "trace directory")->required();
  tput->add_option("--channel", a->channel, "only this channel");
  tput->add_option("--period", a->period_ms, "period in ms, aligned to the trace start (default 1000)");
  tput->add_flag("--csv", a->csv, "CSV: period,start_s,channel,events");
  tput->add_flag("--json", a->json, "JSON: counts per channel");
  tput->add_flag("--net", a->net, "application bytes per period per connection (socket events of record --net)");
  return {tput, [a] { return run_throughput(*a); }};
}

}  // namespace cptrace
