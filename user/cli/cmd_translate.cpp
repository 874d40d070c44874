// `cptrace translate`: its options; the translation is translate/translate.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "translate/translate.h"

namespace cptrace {

SubcommandRunner add_translate_command(CLI::App& app) {
  auto tr = std::make_shared<TranslateOptions>();
  auto* translate = app.add_subcommand("translate", "put every node's events on the reference node's TSC, with bounds");
  translate->add_option("dirs", tr->dirs, "trace directories, one per node")->required();
  translate->add_option("--reference", tr->reference, "node whose TSC is the common timebase")->required();
  translate->add_option("-o,--output", tr->out, "translated trace directory to create")->required();
  translate->add_option("--method", tr->method, "ratio (MinRTT1/MinRTT2), hull (convex hulls) or best (both, intersected)")
      ->check(CLI::IsMember({"ratio", "hull", "best"}));
  translate->add_option("--clock-model", tr->clock_model,
                        "linear (one line per pair, split where hulls cross) or piecewise (any rate changes; "
                        "strict under --max-drift-ppm)")
      ->check(CLI::IsMember({"linear", "piecewise"}));
  translate->add_option("--max-drift-ppm", tr->max_drift_ppm,
                        "piecewise: bound on the rate of one node's clock against another's, in ppm")
      ->check(CLI::Range(0.001, 100000.0));
  translate->add_option("--inputs", tr->inputs, "constraints used: both (default), rounds (MinRTT only) or traffic "
                        "(matched packets of --net traces only)")
      ->check(CLI::IsMember({"both", "rounds", "traffic"}));
  translate->add_flag("-f,--force", tr->overwrite, "overwrite an existing trace in the output directory");
  translate->add_flag("--accept-suspect-sync", tr->accept_suspect_sync,
                      "translate even when a pair's MinRTT rounds contradict each other or the nodes' own clock rates "
                      "(default: refuse); the findings are printed as WARNING lines and kept in meta.json");
  return {translate, [tr] { return cmd_translate(*tr); }};
}

}  // namespace cptrace
