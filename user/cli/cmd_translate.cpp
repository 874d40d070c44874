// `cptrace translate`: its options; the translation is translate/translate.cpp,
// the summary translate/translate_summary.cpp.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "translate/translate_summary.h"

namespace cptrace {
namespace {

// An option whose value is one of translate's choices: its parse function
// (translate.h) is the only check, and its message (flag, bad value, the values
// that exist) becomes the usage error.
template <class E>
CLI::Option* add_choice(CLI::App* app, const std::string& flag, E& to, E (*parse)(std::string_view, std::string_view),
                        const std::string& help) {
  auto set = [&to, parse, flag](const std::string& s) {
    try {
      to = parse(s, flag);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
  };
  return app->add_option_function<std::string>(flag, set, help);
}

}  // namespace

void add_relation_options(CLI::App* cmd, TranslateOptions& tr) {
  cmd->add_option("dirs", tr.dirs, "trace directories, one per node")->required();
  cmd->add_option("--reference", tr.reference,
                  "node whose TSC is the common timebase (needed when the traces hold several nodes)");
  add_choice(cmd, "--method", tr.method, parse_method,
             "ratio (MinRTT1/MinRTT2), hull (convex hulls) or best (both, intersected)");
  add_choice(cmd, "--clock-model", tr.clock_model, parse_clock_model,
             "linear (one line per pair, split where hulls cross) or piecewise (any rate changes; "
             "strict under --max-drift-ppm)");
  cmd->add_option("--max-drift-ppm", tr.max_drift_ppm,
                  "piecewise: bound on the rate of one node's clock against another's, in ppm")
      ->check(CLI::Range(0.001, 100000.0));
  add_choice(cmd, "--inputs", tr.inputs, parse_inputs,
             "constraints used: both (default), rounds (MinRTT only) or traffic "
             "(matched packets of --net traces only)");
  cmd->add_flag("--accept-suspect-sync", tr.accept_suspect_sync,
                "go on even when a pair's MinRTT rounds contradict each other or the nodes' own clock rates "
                "(default: refuse); the findings are printed as WARNING lines");
}

SubcommandRunner add_translate_command(CLI::App& app) {
  auto tr = std::make_shared<TranslateOptions>();
  auto* translate = app.add_subcommand("translate", "put every node's events on the reference node's TSC, with bounds");
  add_relation_options(translate, *tr);
  translate->add_option("-o,--output", tr->out, "translated trace directory to create")->required();
  translate
      ->add_option("--threads", tr->threads, "threads translating frames (default: every CPU); same output for any")
      ->type_name("N")
      ->check(CLI::Range(1u, 1024u));
  translate
      ->add_option("--compression-level", tr->compression_level,
                   "zstd level of the translated events (default 1; negative levels are faster and larger)")
      ->type_name("N");
  translate->add_flag("-f,--force", tr->overwrite, "overwrite an existing trace in the output directory");
  return {translate, [tr] { return run_translate(*tr); }};
}

}  // namespace cptrace
