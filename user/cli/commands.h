// The read-side subcommands. Each returns the process exit status.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace cptrace {

class TraceReader;
// One line per handler change, each line starting with `prefix` (cmd_config.cpp).
void print_handler_history(const TraceReader& r, FILE* out, const char* prefix);

int cmd_dump(const std::string& dir, bool csv);
int cmd_info(const std::string& dir, bool json);
int cmd_check();
// `cptrace config DIR|--socket PATH set CHANNEL HANDLER... | get` (user/cmd_config.cpp).
int cmd_config(const std::string& socket, const std::vector<std::string>& args);

}  // namespace cptrace
