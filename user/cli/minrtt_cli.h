// Command-line hooks of the MinRTT commands: each adds its subcommand to the parser
// and returns the subcommand and the function that runs it.
#pragma once
#include <functional>
#include <utility>

namespace CLI {
class App;
}

namespace cptrace {

using SubcommandRunner = std::pair<CLI::App*, std::function<int()>>;
SubcommandRunner add_minrttd_command(CLI::App& app);  // cmd_minrttd.cpp
SubcommandRunner add_sync_command(CLI::App& app);     // cmd_sync.cpp

// TSC frequency from two correlation points `ms` apart (for the simulated clock's
// ns -> ticks conversion).
double quick_tsc_hz(int ms = 20);

}  // namespace cptrace
