// libFuzzer target: the recorder's control socket (record/control_socket.h), whose
// requests come from outside the recorder. Each line of the input is one request,
// as one connection delivers it, to a handler table that knows some channels
// (one named with bytes that are not UTF-8, as a traced program may name it) and
// has config rules. For each request:
//  - a request that is refused (not JSON, not an object, unknown command,
//    channel or handler) throws a std::exception and changes nothing: the
//    configuration and the history are what they were;
//  - an accepted `set` changes the channels it names (known ones, or "*") to
//    the handler it gives, and `get` answers the configuration as it is;
//  - every answer is JSON text the client can read back.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cptrace.h"
#include "probe/handler_table.h"
#include "trace/json_text.h"

using namespace cptrace;
using nlohmann::json;

namespace {

const char* const kKnown[] = {"chan0", "chan1", "a.in", "bad\\xffname"};

void set_up(HandlerTable& t) {
  t.set_rules(parse_config_text("chan1 xoy 1 2\na.* downsample 3\n* id\n", "fuzz.cfg"));
  for (const char* n : kKnown) t.on_channel(cp_channel_id(n), n);
}

void check_accepted(const json& req, const json& reply, HandlerTable& t) {
  if (!reply.value("ok", false)) __builtin_trap();
  if (req.value("cmd", "") == "get") {
    if (reply.at("handlers") != t.current()) __builtin_trap();
    return;
  }
  std::set<std::string> names(std::begin(kKnown), std::end(kKnown));
  names.insert("*");
  const json& changes = reply.at("changes");
  if (!changes.is_array() || changes.empty()) __builtin_trap();
  json cur = t.current();
  for (const json& c : changes) {
    if (!names.count(c.at("name").get<std::string>())) __builtin_trap();
    bool found = false;
    for (const json& e : cur) found |= e.at("channel") == c.at("channel") && e.at("spec") == c.at("spec");
    if (!found) __builtin_trap();
  }
}

void one_request(HandlerTable& t, const std::string& text) {
  const json before = t.current(), history = t.history();
  json req, reply;
  try {
    req = json::parse(text);  // as ControlSocket::serve reads it
    reply = handle_control(t, req);
  } catch (const std::exception& e) {
    if (t.current() != before || t.history() != history) __builtin_trap();  // a refusal changed something
    reply = {{"ok", false}, {"error", e.what()}};
  } catch (...) {
    __builtin_trap();  // serve catches std::exception only
  }
  if (reply.value("ok", false)) check_accepted(req, reply, t);  // throws (and so fails) on a malformed answer
  if (json::parse(json_text(reply)).is_null()) __builtin_trap();  // the client reads it back
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<uint64_t, cp_handler> map;
  HandlerTable t([&map](uint64_t id, const cp_handler& v) { return map[id] = v, 0; }, [] {}, 2.5e9);
  set_up(t);
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  for (int k = 0; k < 8 && at <= in.size(); ++k) {
    size_t nl = in.find('\n', at);
    if (nl == std::string::npos) nl = in.size();
    one_request(t, in.substr(at, nl - at));
    at = nl + 1;
  }
  return 0;
}
