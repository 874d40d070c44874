// `cptrace overhead -- CMD`: its options; the measurement is load/overhead.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "load/overhead.h"

namespace cptrace {

SubcommandRunner add_overhead_command(CLI::App& app) {
  auto oo = std::make_shared<OverheadOptions>();
  auto* ov = app.add_subcommand("overhead", "CPU a command really takes, by displacement of a calibrated busy loop");
  ov->add_option("--cpus", oo->cpus, "CPUs to measure, the command is pinned to them (default: all allowed)");
  ov->add_option("--calibrate", oo->calibrate_s, "seconds of spinner calibration (default 1)");
  ov->add_option("--baseline", oo->baseline_s, "seconds of background measurement before and after (default 0.5)");
  ov->add_option("--nice", oo->nice,
                 "niceness of the session of command and spinners (default 0); does not keep other sessions out (the "
                 "report flags other load)")
      ->check(CLI::Range(-20, 19));
  ov->add_flag("--json", oo->json, "report as JSON on stdout");
  ov->add_option("cmd", oo->cmd, "command to measure (after --)");
  return {ov, [oo] { return run_overhead(*oo); }};
}

}  // namespace cptrace
