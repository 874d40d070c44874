// `cptrace config`: changes the channel handlers of a running recorder through
// its control socket (record/control_socket.h).
//
//   cptrace config DIR set CHANNEL HANDLER [PARAMS...]
//   cptrace config --socket PATH set CHANNEL HANDLER [PARAMS...]
//   cptrace config DIR get
#include "record/handler_config.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "trace/handler_history.h"
#include "probe/handlers.h"
#include "record/control_socket.h"

using nlohmann::json;

namespace cptrace {

int run_config(const ConfigOptions& c) {
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

}  // namespace cptrace
