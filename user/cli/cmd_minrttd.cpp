// `cptrace minrttd`: its options; the responder's run is sync/minrtt_standalone.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "sync/minrtt_standalone.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_minrttd_command(CLI::App& app) {
  auto a = std::make_shared<MinrttdOptions>();
  auto* c = app.add_subcommand("minrttd", "MinRTT responder: answers clock-probe rounds with kernel timestamps");
  c->add_option("--listen", a->listen, "ADDR:PORT to bind (default [::]:7711, IPv4 too; [V6]:PORT for IPv6)");
  c->add_option("--node", a->node, "node name sent to peers (default: host name)");
  c->add_option("--key", a->key_file,
                "HMAC key file (cptrace keygen): answer only authenticated probes; required unless --insecure");
  c->add_flag("--insecure", a->insecure, "no key: answer unauthenticated probes (trials only)");
  c->add_option("--allow", a->allow, "ADDR,... answered without the cookie check (other sources first get a cookie)");
  c->add_option("--simulate-clock", a->simulate_clock,
                "TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM] applied to the stamps sent");
  c->add_option("--rate-limit", a->per_source_hz, "probes per second answered per source address")
      ->check(CLI::Range(1.0, 1e6));
  c->add_option("--duration", a->duration_s, "exit after SEC seconds (default: until SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--stats-interval", a->stats_s, "print the counters every SEC seconds (0: only at exit)")
      ->check(CLI::NonNegativeNumber);
  return {c, [a] { return run_minrttd(*a); }};
}

}  // namespace cptrace
