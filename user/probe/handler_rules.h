// What a handler rule says, parsed: `HANDLER [PARAMS]` words and the lines of a
// `--config` file (probe/handlers.h describes the handlers and the file). No
// BPF here: the parsing of outside input stands alone, so it can be fuzzed
// (tests/fuzz/fuzz_handler_rules.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cptrace_records.h"

namespace cptrace {

struct HandlerSpec {
  uint32_t kind = CP_H_ID;  // enum cp_handler_kind
  uint64_t p1 = 0, p2 = 0;  // N | X, Y | period ns
  std::string text;  // normalized, e.g. "counter 10ms"
  std::string name() const;
  std::vector<uint64_t> params() const;
};

// Parses "HANDLER PARAMS..." (already split in words). Throws std::invalid_argument
// with a message naming the bad word.
HandlerSpec parse_handler(const std::vector<std::string>& words);

struct ConfigRule {
  std::string pattern;
  HandlerSpec spec;
  int line = 0;  // in the config file, 0 when not from a file
  bool glob() const;
};

// Errors: std::invalid_argument "FILE:LINE: what".
std::vector<ConfigRule> parse_config_text(const std::string& text, const std::string& file);
std::vector<ConfigRule> parse_config_file(const std::string& path);

}  // namespace cptrace
