// `cptrace keygen`: its options; the key file is written by sync/minrtt_keygen.cpp.
#include <memory>

#include <CLI/CLI.hpp>

#include "sync/minrtt_keygen.h"
#include "cli/commands.h"

namespace cptrace {

SubcommandRunner add_keygen_command(CLI::App& app) {
  auto a = std::make_shared<KeygenOptions>();
  auto* c = app.add_subcommand("keygen", "write a new random MinRTT key file (mode 0600) for --key");
  c->add_option("-o,--output", a->out, "key file to create")->required();
  c->add_flag("-f,--force", a->overwrite, "replace an existing file (the name itself, never a symlink's target)");
  return {c, [a] { return run_keygen(*a); }};
}

}  // namespace cptrace
