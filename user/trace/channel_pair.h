// A channel pair FROM,TO: the two channels a duration, a queue or a latency
// plot is measured between, by name. The command line parses `--pair FROM,TO`
// into one (cli/common.h); every analysis below it receives them parsed.
#pragma once
#include <string>
#include <utility>

namespace cptrace {

using ChannelPair = std::pair<std::string, std::string>;  // (from, to)

}  // namespace cptrace
