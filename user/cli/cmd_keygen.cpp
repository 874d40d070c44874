// `cptrace keygen`: a new MinRTT key file (sync/minrtt_protocol.h describes the
// format), created 0600 and never through a symlink.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/commands.h"
#include "sync/minrtt_protocol.h"

namespace cptrace {

namespace {

struct KeygenArgs {
  std::string out;
  bool overwrite = false;
};

int run_keygen(const KeygenArgs& a) {
  minrtt::write_key_file(a.out, a.overwrite);
  fmt::print(stderr,
             "cptrace keygen: new key in {} (mode 0600); copy it to every node, keeping the mode, and give it "
             "to sync, minrttd and record with --key\n",
             a.out);
  return 0;
}

}  // namespace

SubcommandRunner add_keygen_command(CLI::App& app) {
  auto a = std::make_shared<KeygenArgs>();
  auto* c = app.add_subcommand("keygen", "write a new random MinRTT key file (mode 0600) for --key");
  c->add_option("-o,--output", a->out, "key file to create")->required();
  c->add_flag("-f,--force", a->overwrite, "replace an existing file (the name itself, never a symlink's target)");
  return {c, [a] { return run_keygen(*a); }};
}

}  // namespace cptrace
