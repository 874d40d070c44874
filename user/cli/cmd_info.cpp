// `cptrace info`: its options; the summary is analyze/trace_info.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "analyze/trace_info.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_info_command(CLI::App& app) {
  auto a = std::make_shared<InfoOptions>();
  auto* info = app.add_subcommand("info", "summarize a trace");
  info->add_option("dir", a->dir, "trace directory")->required();
  info->add_flag("--json", a->json, "machine-readable summary");
  return {info, [a] { return run_info(*a); }};
}

}  // namespace cptrace
