// Helpers shared by several subcommands (common.cpp).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/handler_history.h"  // handler_change_line, print_handler_history
#include "trace/channel_pair.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace cptrace {

class TraceReader;
struct MemoryBudget;
enum class Output;

// --memory SIZE and --temp-dir DIR of the analysis commands, into `b` (which
// must outlive parsing).
void add_memory_options(CLI::App* cmd, MemoryBudget& b);

// --csv and --json, which exclude each other, into `out` (which must outlive
// parsing); neither leaves it as it was (Output::Text). Returns the two options.
struct OutputFlags {
  CLI::Option *csv, *json;
};
OutputFlags add_output_flags(CLI::App* cmd, Output& out, const std::string& csv_help, const std::string& json_help);

// --pair FROM,TO, repeatable, into `raw` as typed; `old_name` (top's --pairs,
// rates' --channel-pair) is accepted for existing scripts but not shown in
// --help. `one_value_each`: each --pair takes one value, so a positional after
// it stays a positional (top); otherwise `--pair A,B C,D` gives two pairs.
// Returns the --pair option.
CLI::Option* add_pair_option(CLI::App* cmd, std::vector<std::string>& raw, const std::string& help,
                             const std::string& old_name = "", bool one_value_each = false);
// The pairs of --pair, parsed: exactly two non-empty channel names around one
// comma. Called by the command after CLI11 is done, so that a malformed pair is
// an error of the command like any other ("cptrace CMD: ...", exit 1), and
// worded the same for every command.
std::vector<ChannelPair> channel_pairs(const std::vector<std::string>& raw);

}  // namespace cptrace
