#include "cluster/agent_wire.h"

#include <errno.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

namespace cptrace {

namespace {

void put32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
template <class T>
T get(const std::string& s, size_t at) {
  T v;
  memcpy(&v, s.data() + at, sizeof v);
  return v;
}

}  // namespace

std::string encode_wire(WireType type, uint64_t offset, const char* data, size_t len) {
  std::string s;
  s.reserve(kWireHeader + len);
  put32(s, kWireMagic);
  put32(s, uint32_t(type));
  put64(s, offset);
  put32(s, uint32_t(len));
  put32(s, 0);
  s.append(data, len);
  return s;
}

bool WireDecoder::next(WireFrame& out) {
  if (buf_.size() < kWireHeader) return false;
  uint32_t magic = get<uint32_t>(buf_, 0), type = get<uint32_t>(buf_, 4), len = get<uint32_t>(buf_, 16);
  if (magic != kWireMagic || type < 1 || type > uint32_t(WireType::Stopped) || len > kWireMaxPayload)
    throw std::runtime_error(fmt::format("not a cptrace agent stream (starts with \"{}\")", printable(buf_, 60)));
  if (buf_.size() < kWireHeader + len) return false;
  out.type = WireType(type);
  out.offset = get<uint64_t>(buf_, 8);
  out.data.assign(buf_, kWireHeader, len);
  buf_.erase(0, kWireHeader + len);
  return true;
}

std::string printable(const std::string& s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\')
      out += char(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

nlohmann::json parse_done(const std::string& data) {
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(fmt::format("its Done frame is not a JSON object: \"{}\"", printable(data, 60)));
  auto want = [&](const char* key, bool ok, const char* what) {
    if (j.contains(key) && !ok) throw std::runtime_error(fmt::format("its Done frame's \"{}\" is not {}", key, what));
  };
  auto at = [&](const char* key) -> const nlohmann::json& { return j.contains(key) ? j[key] : j; };
  want("status", at("status").is_number_integer(), "an integer");
  want("signal", at("signal").is_number_integer(), "an integer");
  want("events_bytes", at("events_bytes").is_number_unsigned(), "a byte count");
  want("running", at("running").is_boolean(), "true or false");
  want("stopped_by", at("stopped_by").is_string(), "a string");
  want("stderr_tail", at("stderr_tail").is_string(), "a string");
  const nlohmann::json& e = at("ended_mono_ns");
  want("ended_mono_ns", e.is_array() && e.size() == 2 && e[0].is_number_unsigned() && e[1].is_number_unsigned(),
       "two instants");
  return j;
}

namespace {

// One field of the request, read only if present, checked before any use.
class RequestFields {
 public:
  explicit RequestFields(const nlohmann::json& j) : j_(j) {}
  [[noreturn]] static void fail(const char* key, const char* what) {
    throw std::runtime_error(fmt::format("request: \"{}\" must be {}", key, what));
  }
  std::optional<std::string> text(const char* key, bool required) const {
    if (!j_.contains(key)) {
      if (required) fail(key, "given (a non-empty string)");
      return std::nullopt;
    }
    const nlohmann::json& v = j_[key];
    if (!v.is_string() || v.get_ref<const std::string&>().find('\0') != std::string::npos)
      fail(key, "a string without NUL bytes");
    if (required && v.get_ref<const std::string&>().empty()) fail(key, "a non-empty string");
    return v.get<std::string>();
  }
  std::vector<std::string> texts(const char* key) const {
    std::vector<std::string> out;
    if (!j_.contains(key)) return out;
    if (!j_[key].is_array()) fail(key, "an array of strings");
    for (const nlohmann::json& v : j_[key]) {
      if (!v.is_string() || v.get_ref<const std::string&>().find('\0') != std::string::npos)
        fail(key, "an array of strings without NUL bytes");
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  double seconds(const char* key, double dflt) const {
    if (!j_.contains(key)) return dflt;
    const nlohmann::json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      fail(key, "a non-negative number of seconds");
    return v.get<double>();
  }
  bool flag(const char* key) const {
    if (!j_.contains(key)) return false;
    if (!j_[key].is_boolean()) fail(key, "true or false");
    return j_[key].get<bool>();
  }
  uint64_t offset(const char* key) const {
    if (!j_.contains(key)) return 0;
    if (!j_[key].is_number_unsigned()) fail(key, "a byte offset (an unsigned integer)");
    return j_[key].get<uint64_t>();
  }

 private:
  const nlohmann::json& j_;
};

}  // namespace

AgentRequest parse_agent_request(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(fmt::format("request: not a JSON object: \"{}\"", printable(line, 60)));
  RequestFields f(j);
  AgentRequest r;
  r.op = f.text("op", true).value();
  if (r.op != "record" && r.op != "follow" && r.op != "fetch")
    throw std::runtime_error(fmt::format("request: unknown op \"{}\" (record, follow or fetch)", printable(r.op, 40)));
  r.dir = f.text("dir", true).value();
  r.offset = r.op == "record" ? 0 : f.offset("offset");
  if (r.op == "fetch") r.stop = f.flag("stop"), r.wait = f.seconds("wait", 0);
  if (r.op != "record") return r;
  r.node = f.text("node", true).value();
  r.key = f.text("key", false);
  if (r.key && r.key->find_first_of("\r\n") != std::string::npos) RequestFields::fail("key", "one line");
  r.record_args = f.texts("record_args");
  r.command = f.texts("command");
  r.controller_timeout = f.seconds("controller_timeout", 30);
  r.hold = f.flag("hold");
  return r;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= size_t(w);
  }
  return true;
}

}  // namespace cptrace
