// libFuzzer target: any text as a `record --config` file (probe/handler_rules.h).
// It gives rules or a std::invalid_argument naming FILE:LINE, nothing else; and
// every rule given is one a user can read back: its pattern fits a channel name
// and holds no comment, and its normalized text parses to the same handler.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "probe/handler_rules.h"

using namespace cptrace;

namespace {

std::vector<std::string> words_of(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<ConfigRule> rules;
  try {
    rules = parse_config_text(text, "fuzz.cfg");
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("fuzz.cfg:", 0) != 0) __builtin_trap();  // names the file and line
    return 0;
  }
  for (const ConfigRule& r : rules) {
    if (r.pattern.empty() || r.pattern.size() >= CP_CHANNEL_NAME_MAX || r.pattern.find('#') != std::string::npos)
      __builtin_trap();
    HandlerSpec again = parse_handler(words_of(r.spec.text));
    if (again.kind != r.spec.kind || again.p1 != r.spec.p1 || again.p2 != r.spec.p2 || again.text != r.spec.text)
      __builtin_trap();
  }
  return 0;
}
