// The load-generation commands (gen, sink, maxrate, overhead): registered on the
// command line by main(), run when selected.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <optional>

namespace cptrace {

// Adds the subcommands; the returned function runs the selected one (its exit
// status) or returns nullopt if none of them was selected.
std::function<std::optional<int>()> add_load_commands(CLI::App& app);

}  // namespace cptrace
