// `cptrace gen`: its options; the generator's run is load/gen_run.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "load/gen_run.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_gen_command(CLI::App& app) {
  auto gc = std::make_shared<GenRunOptions>();
  auto* gen = app.add_subcommand("gen", "emit tuples at an exact constant rate (TCP or UDP)");
  gen->add_option("--to", gc->to, "HOST:PORT of the receiver")->required();
  gen->add_option("--rate", gc->g.rate, "tuples per second (all threads together)")->required();
  gen->add_option("--duration", gc->g.duration_s, "seconds of slots")->required();
  gen->add_option("--size", gc->g.size, "bytes per tuple, 16-byte header included (default 64)");
  gen->add_option("--threads", gc->g.threads, "emitting threads, one socket each (default 1)");
  gen->add_flag("--udp", gc->g.udp, "one UDP datagram per tuple (default TCP)");
  gen->add_option("--batch", gc->g.batch, "when behind schedule, send up to N due tuples in one write (default 1)");
  gen->add_option("--channel", gc->g.channel, "cp_logTS channel of the emissions (default gen.emit)");
  gen->add_option("--first-id", gc->g.first_id, "id of the first tuple (default 0)");
  gen->add_option("--control", gc->control, "HOST:PORT of a sink's control port: run one checked round");
  gen->add_flag("--json", gc->json, "report as JSON on stdout");
  return {gen, [gc] { return run_gen(*gc); }};
}

}  // namespace cptrace
