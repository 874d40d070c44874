// Helpers shared by several subcommands (common.cpp).
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "trace/handler_history.h"  // handler_change_line, print_handler_history

namespace CLI {
class App;
}

namespace cptrace {

class TraceReader;
struct MemoryBudget;

// --memory SIZE and --temp-dir DIR of the analysis commands, into `b` (which
// must outlive parsing).
void add_memory_options(CLI::App* cmd, MemoryBudget& b);

}  // namespace cptrace
