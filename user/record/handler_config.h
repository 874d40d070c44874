// `cptrace config`: changes the channel handlers of a running recorder through
// its control socket (control_socket.h).
//
//   cptrace config DIR set CHANNEL HANDLER [PARAMS...]
//   cptrace config --socket PATH set CHANNEL HANDLER [PARAMS...]
//   cptrace config DIR get
#pragma once
#include <string>
#include <vector>

namespace cptrace {

struct ConfigOptions {
  std::string socket;
  std::vector<std::string> args;
};

// Sends the request, prints the handlers (get) or the changes (set); 0. A bad
// request, handler or refusal throws, the configuration unchanged.
int run_config(const ConfigOptions& a);

}  // namespace cptrace
