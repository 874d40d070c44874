// libFuzzer target: the request line a cluster agent reads on its stdin
// (cluster/agent_wire.h parse_agent_request), before it creates directories,
// writes a key or runs a recorder with it. Any bytes give a request or a
// std::runtime_error starting "request: ", nothing else; a request has a known op,
// a non-empty dir and, for record, a node, with no NUL byte in any string that
// becomes a path or an argument, a one-line key and finite non-negative seconds;
// and the same request written back as JSON reads back the same.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/agent_wire.h"

using namespace cptrace;

namespace {

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

void check(const AgentRequest& r) {
  if (r.op != "record" && r.op != "follow" && r.op != "fetch") __builtin_trap();
  if (r.dir.empty() || has_nul(r.dir)) __builtin_trap();
  if (r.op == "record" && (r.node.empty() || has_nul(r.node))) __builtin_trap();
  if (r.key && (has_nul(*r.key) || r.key->find('\n') != std::string::npos)) __builtin_trap();
  for (const auto* v : {&r.record_args, &r.command})
    for (const std::string& a : *v)
      if (has_nul(a)) __builtin_trap();
  for (double s : {r.controller_timeout, r.wait})
    if (!std::isfinite(s) || s < 0) __builtin_trap();
}

nlohmann::json to_json(const AgentRequest& r) {
  nlohmann::json j = {{"op", r.op}, {"dir", r.dir}, {"offset", r.offset}, {"stop", r.stop}, {"wait", r.wait}};
  if (r.op == "record")
    j.update({{"node", r.node},
              {"record_args", r.record_args},
              {"command", r.command},
              {"controller_timeout", r.controller_timeout},
              {"hold", r.hold}});
  if (r.key) j["key"] = *r.key;
  return j;
}

bool same(const AgentRequest& a, const AgentRequest& b) {
  return a.op == b.op && a.dir == b.dir && a.node == b.node && a.key == b.key && a.record_args == b.record_args &&
         a.command == b.command && a.controller_timeout == b.controller_timeout && a.wait == b.wait &&
         a.hold == b.hold && a.stop == b.stop && a.offset == b.offset;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AgentRequest r;
  try {
    r = parse_agent_request(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind("request: ", 0) != 0) __builtin_trap();
    return 0;
  }
  check(r);
  if (!same(r, parse_agent_request(to_json(r).dump()))) __builtin_trap();
  return 0;
}
