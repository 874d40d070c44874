// Handler changes as text lines: see handler_history.h.
#include "trace/handler_history.h"

#include <exception>

#include <fmt/core.h>

#include "trace/trace_reader.h"

namespace cptrace {

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
