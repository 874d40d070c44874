// Facts about this machine that make a trace self-describing and that
// `cptrace check` verifies: host, kernel, CPU, TSC flags, clocksource, boot id.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct NodeInfo {
  std::string host, kernel, cpu_model, clocksource, boot_id;
  std::vector<std::string> tsc_flags;  // of constant_tsc, nonstop_tsc, tsc_known_freq, rdtscp
  bool invariant_tsc() const;  // constant_tsc && nonstop_tsc
  nlohmann::json to_json() const;
};

NodeInfo read_node_info();
// Whole file as a string ("" if unreadable); trailing newline stripped.
std::string read_text_file(const std::string& path);

}  // namespace cptrace
