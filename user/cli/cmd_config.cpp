// `cptrace config`: changes the channel handlers of a running recorder through
// its control socket (user/control_socket.h), and prints handler histories.
//
//   cptrace config DIR set CHANNEL HANDLER [PARAMS...]
//   cptrace config --socket PATH set CHANNEL HANDLER [PARAMS...]
//   cptrace config DIR get
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "record/control_socket.h"
#include "probe/handlers.h"
#include "trace/trace_reader.h"

using nlohmann::json;

namespace cptrace {

namespace {

std::string change_line(const json& c) {
  uint64_t before = c.at("before").at("mono_ns"), after = c.at("after").at("mono_ns");
  return fmt::format("{:<24} {:<16} from mono {} ns (switch window {} ns, gen {}, {} `{}`)",
                     c.value("name", "?"), c.value("spec", "?"), before, after - before,
                     c.value("gen", 0), c.value("source", "?"), c.value("rule", ""));
}

}  // namespace

void print_handler_history(const TraceReader& r, FILE* out, const char* prefix) {
  for (const json& c : r.handler_changes()) {
    try {
      fprintf(out, "%s%s\n", prefix, change_line(c).c_str());
    } catch (const std::exception& e) {
      fprintf(out, "%s(malformed handler change: %s)\n", prefix, e.what());
    }
  }
}

int cmd_config(const std::string& socket, const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  std::string path = socket;
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
    throw std::runtime_error(reply.value("error", "the recorder refused the request") +
                             " (configuration unchanged)");
  if (req["cmd"] == "get") {
    for (const json& h : reply["handlers"])
      printf("%-24s %s\n", h.value("name", "?").c_str(), h.value("spec", "?").c_str());
    return 0;
  }
  for (const json& c : reply["changes"]) printf("%s\n", change_line(c).c_str());
  return 0;
}

}  // namespace cptrace
