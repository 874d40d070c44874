// `cptrace config`: changes the channel handlers of a running recorder through
// its control socket (record/control_socket.h).
//
//   cptrace config DIR set CHANNEL HANDLER [PARAMS...]
//   cptrace config --socket PATH set CHANNEL HANDLER [PARAMS...]
//   cptrace config DIR get
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "probe/handlers.h"
#include "record/control_socket.h"

using nlohmann::json;

namespace cptrace {

namespace {

struct ConfigArgs {
  std::string socket;
  std::vector<std::string> args;
};

int run_config(const ConfigArgs& c) {
  std::vector<std::string> a = c.args;
  std::string path = c.socket;
  if (path.empty()) {
    if (a.empty()) throw std::invalid_argument("give the trace directory of the recording, or --socket PATH");
    path = (std::filesystem::path(a[0]) / "control.sock").string();
    a.erase(a.begin());
  }
  if (a.empty()) throw std::invalid_argument("missing request: set CHANNEL HANDLER [PARAMS...] or get");
  json req;
  if (a[0] == "get" && a.size() == 1) {
    req = {{"cmd", "get"}};
  } else if (a[0] == "set") {
    if (a.size() < 3) throw std::invalid_argument("usage: set CHANNEL HANDLER [PARAMS...]");
    std::vector<std::string> words(a.begin() + 2, a.end());
    parse_handler(words);  // a bad handler is reported here already, without asking the recorder
    req = {{"cmd", "set"}, {"channel", a[1]}, {"handler", words}};
  } else {
    throw std::invalid_argument(fmt::format("unknown request `{}`: set CHANNEL HANDLER [PARAMS...] or get", a[0]));
  }
  json reply = control_request(path, req);
  if (!reply.value("ok", false))
    throw std::runtime_error(reply.value("error", "the recorder refused the request") + " (configuration unchanged)");
  if (req["cmd"] == "get") {
    for (const json& h : reply["handlers"]) fmt::print("{:<24} {}\n", h.value("name", "?"), h.value("spec", "?"));
    return 0;
  }
  for (const json& ch : reply["changes"]) fmt::print("{}\n", handler_change_line(ch));
  return 0;
}

}  // namespace

SubcommandRunner add_config_command(CLI::App& app) {
  auto c = std::make_shared<ConfigArgs>();
  auto* config = app.add_subcommand("config",
                                    "change channel handlers of a running recording: "
                                    "config DIR|--socket PATH set CHANNEL HANDLER [PARAMS] | get");
  config->add_option("--socket", c->socket, "the recorder's control socket (instead of DIR)");
  config->add_option("args", c->args, "[DIR] set CHANNEL HANDLER [PARAMS...] | [DIR] get")->required();
  return {config, [c] { return run_config(*c); }};
}

}  // namespace cptrace
