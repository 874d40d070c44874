// `cptrace netlat`: its options; the command is run_netlat
// (netlat/netlat_command.h).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "netlat/netlat_command.h"

namespace cptrace {

SubcommandRunner add_netlat_command(CLI::App& app) {
  auto o = std::make_shared<NetlatOptions>();
  auto format = std::make_shared<NetlatFormat>(NetlatFormat::Text);
  const char* what = "one-way delay of every packet matched between recorded nodes (record --net), with bounds";
  auto* cmd = app.add_subcommand("netlat", what);
  add_relation_options(cmd, o->relate);
  cmd->add_option("--from", o->from, "only packets sent by this node");
  cmd->add_option("--to", o->to, "only packets received by this node");
  cmd->add_option("--port", o->port, "only flows with this port at either end")->check(CLI::Range(1, 65535));
  cmd->add_option("--addr", o->addr, "only flows with this IPv4 or IPv6 address at either end");
  cmd->add_option("--pid", o->pid, "only packets sent or received by this process (as the recorder attributed them)");
  auto* csv = cmd->add_flag_callback(
      "--csv", [format] { *format = NetlatFormat::Csv; }, "one CSV row per matched packet instead of the summary");
  cmd->add_flag_callback(
         "--json", [format] { *format = NetlatFormat::Json; },
         "the summary as JSON: per flow and direction, counts and p0..p100 with strict bounds")
      ->excludes(csv);
  return {cmd, [o, format] { return run_netlat(*o, *format); }};
}

}  // namespace cptrace
