// The read-side subcommands. Each returns the process exit status.
#pragma once
#include <string>

namespace cptrace {

int cmd_dump(const std::string& dir, bool csv);
int cmd_info(const std::string& dir, bool json);
int cmd_check();

}  // namespace cptrace
