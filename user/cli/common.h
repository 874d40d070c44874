// Helpers shared by several subcommands (common.cpp).
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace cptrace {

class TraceReader;
struct MemoryBudget;

// --memory SIZE and --temp-dir DIR of the analysis commands, into `b` (which
// must outlive parsing).
void add_memory_options(CLI::App* cmd, MemoryBudget& b);

// One handler change (an entry of the trace's or the recorder's change list) as
// one line: `config set` prints its reply this way, dump and info the history.
std::string handler_change_line(const nlohmann::json& change);
// One line per handler change of the trace, each starting with `prefix`.
void print_handler_history(const TraceReader& r, FILE* out, const char* prefix);

}  // namespace cptrace
