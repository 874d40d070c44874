// `cptrace sink`: its options; the receiver's run is load/sink_run.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "load/sink_run.h"

namespace cptrace {

SubcommandRunner add_sink_command(CLI::App& app) {
  auto so = std::make_shared<SinkOptions>();
  auto* sink = app.add_subcommand("sink", "receive tuples, check ids for gaps and duplicates, report");
  sink->add_option("--listen", so->port, "data port (TCP, or UDP with --udp)")->required();
  sink->add_option("--bind", so->bind, "address to listen on (default: all)");
  sink->add_flag("--udp", so->udp, "receive UDP datagrams");
  sink->add_option("--throttle", so->throttle, "consume at most this many tuples/s (a slow consumer)");
  sink->add_option("--control-port", so->control_port, "control port (default: data port + 1)");
  sink->add_option("--rounds", so->rounds, "exit after this many control rounds");
  sink->add_option("--duration", so->duration_s, "exit after this many seconds");
  sink->add_option("--channel", so->channel, "cp_logTS channel of the receipts (default sink.recv)");
  sink->add_option("--drain-idle", so->drain_idle_s, "end of round: stop waiting after this long without a tuple");
  sink->add_flag("--json", so->json, "final report as JSON on stdout");
  return {sink, [so] { return run_sink(*so); }};
}

}  // namespace cptrace
