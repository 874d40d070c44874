#include "cli/common.h"

#include <stdexcept>

#include <CLI/CLI.hpp>

#include "tables/memory_budget.h"

#include <exception>

#include <fmt/core.h>

#include "trace/trace_reader.h"

namespace cptrace {

void add_memory_options(CLI::App* cmd, MemoryBudget& b) {
  cmd->add_option_function<std::string>(
         "--memory",
         [&b](const std::string& v) {
           try {
             b.bytes = parse_memory_size("--memory", v);
           } catch (const std::runtime_error& e) {
             throw CLI::ValidationError(e.what());
           }
         },
         "memory for the per-tuple data (default 1G); beyond it, data is spilled to --temp-dir")
      ->type_name("SIZE");
  cmd->add_option("--temp-dir", b.temp_dir,
                  "directory for spilled data (default $TMPDIR or /tmp); the files have no name and vanish at exit")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--threads", b.threads, "threads for the per-tuple work (default: every CPU); same output for any")
      ->type_name("N")
      ->check(CLI::Range(1u, 1024u));
}

std::string handler_change_line(const nlohmann::json& c) {
  uint64_t before = c.at("before").at("mono_ns"), after = c.at("after").at("mono_ns");
  return fmt::format("{:<24} {:<16} from mono {} ns (switch window {} ns, gen {}, {} `{}`)", c.value("name", "?"),
                     c.value("spec", "?"), before, after - before, c.value("gen", 0), c.value("source", "?"),
                     c.value("rule", ""));
}

void print_handler_history(const TraceReader& r, FILE* out, const char* prefix) {
  for (const nlohmann::json& c : r.handler_changes()) {
    try {
      fmt::print(out, "{}{}\n", prefix, handler_change_line(c));
    } catch (const std::exception& e) {
      // A damaged entry costs its own line, not the rest of the listing.
      fmt::print(out, "{}(malformed handler change: {})\n", prefix, e.what());
    }
  }
}

}  // namespace cptrace
