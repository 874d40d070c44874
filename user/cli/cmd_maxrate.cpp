// `cptrace maxrate`: the highest rate a sink sustains, by rounds of rising rate
// (load/maxrate.cpp).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "load/maxrate.h"
#include "load/net_endpoint.h"

namespace cptrace {

namespace {

struct MaxrateArgs {
  std::string to;  // parsed when run, inside main's error handling
  MaxrateOptions o;
};

}  // namespace

SubcommandRunner add_maxrate_command(CLI::App& app) {
  auto a = std::make_shared<MaxrateArgs>();
  MaxrateOptions& mo = a->o;
  auto* mr = app.add_subcommand("maxrate", "find the maximum sustainable throughput against a sink");
  mr->add_option("--to", a->to, "HOST:PORT of the data receiver")->required();
  mr->add_option("--control", mo.control, "HOST:PORT of the sink's control port (default: --to port + 1)");
  mr->add_option("--from", mo.from, "first rate, tuples/s")->required();
  mr->add_option("--step", mo.step, "rate increment per round")->required();
  mr->add_option("--duration", mo.duration_s, "seconds per round")->required();
  mr->add_option("--max", mo.max, "highest rate to try");
  mr->add_option("--tolerance", mo.tolerance, "relative shortfall allowed (default 0.02)");
  mr->add_option("--size", mo.gen.size, "bytes per tuple (default 64)");
  mr->add_option("--threads", mo.gen.threads, "generator threads (default 1)");
  mr->add_option("--batch", mo.gen.batch, "catch-up batch (default 1)");
  mr->add_flag("--udp", mo.gen.udp, "UDP instead of TCP");
  mr->add_flag("--json", mo.json, "rounds and result as JSON");
  return {mr, [a] {
            a->o.gen.to = parse_endpoint(a->to, "--to");
            return run_maxrate(a->o);
          }};
}

}  // namespace cptrace
