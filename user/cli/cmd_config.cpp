// `cptrace config`: its options; the request is sent by record/handler_config.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "record/handler_config.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_config_command(CLI::App& app) {
  auto c = std::make_shared<ConfigOptions>();
  auto* config = app.add_subcommand("config",
                                    "change channel handlers of a running recording: "
                                    "config DIR|--socket PATH set CHANNEL HANDLER [PARAMS] | get");
  config->add_option("--socket", c->socket, "the recorder's control socket (instead of DIR)");
  config->add_option("args", c->args, "[DIR] set CHANNEL HANDLER [PARAMS...] | [DIR] get")->required();
  return {config, [c] { return run_config(*c); }};
}

}  // namespace cptrace
