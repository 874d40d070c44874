// `cptrace check`: no options; the checks are record/machine_check.cpp.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "record/machine_check.h"

namespace cptrace {

SubcommandRunner add_check_command(CLI::App& app) {
  auto* check =
      app.add_subcommand("check", "can this machine record? (root, BTF, uprobes, nop5 path, TSC, ring buffer)");
  return {check, run_check};
}

}  // namespace cptrace
