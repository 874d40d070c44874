// cptrace: the command line. Each subcommand lives in its own file (commands.h);
// this only parses arguments (CLI11), runs the subcommand given and turns its
// exceptions into one clear line + exit 1.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "os/fatal_signals.h"
#include "os/say.h"

namespace {

// One list, in the order `cptrace --help` shows them.
constexpr cptrace::SubcommandRunner (*kCommands[])(CLI::App&) = {
    cptrace::add_record_command, cptrace::add_dump_command,       cptrace::add_info_command,
    cptrace::add_config_command, cptrace::add_throughput_command, cptrace::add_rates_command,
    cptrace::add_top_command,    cptrace::add_report_command,     cptrace::add_export_command,
    cptrace::add_check_command,  cptrace::add_translate_command,  cptrace::add_latency_command,
    cptrace::add_netlat_command, cptrace::add_minrttd_command,    cptrace::add_sync_command,
    cptrace::add_keygen_command, cptrace::add_cluster_command,    cptrace::add_gen_command,
    cptrace::add_sink_command,   cptrace::add_maxrate_command,    cptrace::add_overhead_command,
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cptrace: cross-machine durations with strict error bounds"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cptrace " CPTRACE_VERSION " (trace format 1)");
  std::vector<cptrace::SubcommandRunner> commands;
  for (auto add : kCommands) commands.push_back(add(app));

  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& [sub, run] : commands)
      if (*sub) {
        cptrace::set_command_name(sub->get_name());
        cptrace::report_fatal_signals();
        return run();
      }
  } catch (const std::exception& e) {
    cptrace::set_command_name(app.get_subcommands().front()->get_name());
    cptrace::say_line(e.what());
    return 1;
  }
  return 0;
}
