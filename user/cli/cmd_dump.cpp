// `cptrace dump`: its options; the printing is analyze/trace_dump.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "analyze/trace_dump.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_dump_command(CLI::App& app) {
  auto a = std::make_shared<DumpOptions>();
  auto* dump = app.add_subcommand("dump", "print every event of a trace");
  dump->add_option("dir", a->dir, "trace directory")->required();
  dump->add_flag("--csv", a->csv,
                 "CSV: node,kind,ts,channel,tuple,pid,tid,cpu (ts in the node's TSC ticks); of a translated trace: "
                 "node,kind,local_ts,ref_est,ref_lo,ref_hi,channel,tuple,pid,tid,cpu (ref_* on the reference's TSC)");
  return {dump, [a] { return run_dump(*a); }};
}

}  // namespace cptrace
