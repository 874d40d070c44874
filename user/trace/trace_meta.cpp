#include "trace/trace_meta.h"

#include <cmath>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "trace/json_text.h"
#include "trace/trace_file.h"

namespace cptrace {

using json = nlohmann::json;

namespace {

// The value shown as its JSON text, cut to 40 bytes: a byte of a cut character,
// or one that is not UTF-8 (a meta.json built in memory), as \xNN.
[[noreturn]] void wrong(const std::string& key, const json& v, const char* want) {
  throw std::runtime_error(
      fmt::format("{}: {} is {}, not {}", key, valid_utf8(json_text(v).substr(0, 40)), v.type_name(), want));
}

// The value at `key` of object `o`, nullptr when absent or null.
const json* at(const json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

void read_string(const json& o, const char* key, std::string& out) {
  const json* v = at(o, key);
  if (!v) return;
  if (!v->is_string()) wrong(key, *v, "a string");
  out = v->get<std::string>();
}

void read_bool(const json& o, const std::string& name, const char* key, bool& out) {
  const json* v = at(o, key);
  if (!v) return;
  if (!v->is_boolean()) wrong(name, *v, "true or false");
  out = v->get<bool>();
}

template <typename T>
void read_integer(const json& o, const std::string& name, const char* key, std::optional<T>& out) {
  const json* v = at(o, key);
  if (!v) return;
  // A parsed non-negative integer is unsigned; one built in memory may be signed.
  const bool fits = v->is_number_integer() &&
                    (std::is_signed_v<T> ? !v->is_number_unsigned() || v->get<uint64_t>() <= uint64_t(INT64_MAX)
                                         : v->is_number_unsigned() || v->get<int64_t>() >= 0);
  if (!fits) wrong(name, *v, std::is_signed_v<T> ? "a signed 64-bit integer" : "an unsigned integer");
  out = v->get<T>();
}

RecordedInstant read_instant(const json& o, const char* key) {
  RecordedInstant r;
  const json* v = at(o, key);
  if (!v) return r;
  const std::string k = key;
  if (!v->is_object()) wrong(k, *v, "an object");
  read_integer(*v, k + ".realtime_ns", "realtime_ns", r.realtime_ns);
  read_integer(*v, k + ".mono_ns", "mono_ns", r.mono_ns);
  read_integer(*v, k + ".tsc", "tsc", r.tsc);
  return r;
}

}  // namespace

std::optional<int64_t> TraceMeta::start_rt_minus_mono_ns() const {
  int64_t off = 0;
  if (!start.realtime_ns || !start.mono_ns || __builtin_sub_overflow(*start.realtime_ns, *start.mono_ns, &off))
    return std::nullopt;
  return off;
}

TraceMeta TraceMeta::from_json(const json& meta) {
  TraceMeta m;
  if (!meta.is_object()) {
    if (meta.is_null()) return m;
    wrong("(top level)", meta, "an object");
  }
  read_string(meta, "node", m.node);
  m.start = read_instant(meta, "start");
  m.stop = read_instant(meta, "stop");
  if (const json* v = at(meta, "tsc_hz")) {
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0)
      wrong("tsc_hz", *v, "a frequency in Hz");
    m.tsc_hz = v->get<double>();
  }
  read_bool(meta, "complete", "complete", m.complete);
  std::optional<uint64_t> net_events;
  read_integer(meta, "recorded_net_events", "recorded_net_events", net_events);
  m.recorded_net_events = net_events.value_or(0);
  if (const json* net = at(meta, "net")) {
    if (!net->is_object()) wrong("net", *net, "an object");
    read_bool(*net, "net.send_calls", "send_calls", m.net_send_calls);
  }
  return m;
}

TraceMeta read_trace_meta(const std::string& dir) {
  const std::string path = dir + "/meta.json";
  json j;
  try {
    j = json::parse(read_trace_file(path));
  } catch (const json::parse_error& e) {
    throw std::runtime_error(fmt::format("{} at byte {}: not valid JSON", path, e.byte > 0 ? e.byte - 1 : 0));
  }
  try {
    return TraceMeta::from_json(j);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

void reread_trace_meta(const std::string& dir, json& meta, TraceMeta& info) {
  try {
    json j = json::parse(read_trace_file(dir + "/meta.json"));
    if (!j.is_object()) return;
    info = TraceMeta::from_json(j);
    meta = std::move(j);
  } catch (const std::exception&) {
  }
}

}  // namespace cptrace
