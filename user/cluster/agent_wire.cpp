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
    throw std::runtime_error(fmt::format("not a cptrace agent stream (starts with \"{}\")",
                                         buf_.substr(0, std::min<size_t>(buf_.size(), 60))));
  if (buf_.size() < kWireHeader + len) return false;
  out.type = WireType(type);
  out.offset = get<uint64_t>(buf_, 8);
  out.data.assign(buf_, kWireHeader, len);
  buf_.erase(0, kWireHeader + len);
  return true;
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
