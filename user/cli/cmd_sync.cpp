// `cptrace sync`: its options; the rounds and the trace are record/sync_trace.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "record/sync_trace.h"

namespace cptrace {

SubcommandRunner add_sync_command(CLI::App& app) {
  auto a = std::make_shared<SyncOptions>();
  auto* c = app.add_subcommand("sync", "MinRTT rounds with peers, written as a trace directory");
  c->add_option("--peers", a->peers, "HOST:PORT,... of MinRTT responders")->required();
  c->add_option("-o,--output", a->out_dir, "trace directory to create")->required();
  c->add_option("--node", a->node, "this node's name (default: host name)");
  c->add_option("--sync-rounds", a->rounds, "rounds per peer")->check(CLI::Range(1, 1000000));
  c->add_option("--sync-wait", a->wait_s, "seconds to keep retrying a peer that does not answer yet")
      ->check(CLI::Range(0.0, 3600.0));
  c->add_option("--gap-ms", a->gap_ms, "pause between rounds, ms")->check(CLI::Range(0.0, 10000.0));
  c->add_option("--phase", a->phase, "phase written into the rounds")
      ->check(CLI::IsMember({"start", "stop", "stream"}));
  c->add_option("--listen", a->listen, "also answer probes on ADDR:PORT while syncing");
  c->add_option("--key", a->key_file, "HMAC key file (cptrace keygen); required unless --insecure");
  c->add_flag("--insecure", a->insecure, "no key: unauthenticated rounds, recorded as such in meta.json (trials only)");
  c->add_option("--simulate-clock", a->simulate_clock,
                "TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM] applied to every timestamp written");
  c->add_flag("-f,--force", a->overwrite, "overwrite an existing trace in the directory");
  return {c, [a] { return run_sync(*a); }};
}

}  // namespace cptrace
