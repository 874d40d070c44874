#include "cluster/agent_wire.h"

#include <errno.h>
#include <unistd.h>

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
