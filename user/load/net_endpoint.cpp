#include "load/net_endpoint.h"

#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

namespace cptrace {

std::string Endpoint::str() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

Endpoint parse_endpoint(const std::string& s, const std::string& flag) {
  Endpoint e;
  std::string port;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      throw std::runtime_error(fmt::format("{} {}: expected [IPv6]:PORT", flag, s));
    e.host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throw std::runtime_error(fmt::format("{} {}: expected HOST:PORT", flag, s));
    e.host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535)
    throw std::runtime_error(fmt::format("{} {}: port '{}' is not in 1..65535", flag, s, port));
  e.port = uint16_t(p);
  return e;
}

int connect_to(const Endpoint& e, int type) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = type;
  std::string port = std::to_string(e.port);
  if (int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, &res))
    throw std::runtime_error(fmt::format("{}: {}", e.str(), gai_strerror(rc)));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    why = strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  throw std::runtime_error(fmt::format("cannot connect to {}: {}", e.str(), why));
}

int listen_on(const std::string& bind_addr, uint16_t port, int type) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = type;
  hints.ai_flags = AI_PASSIVE;
  hints.ai_family = bind_addr.empty() ? AF_INET6 : AF_UNSPEC;
  std::string ps = std::to_string(port);
  int rc = getaddrinfo(bind_addr.empty() ? nullptr : bind_addr.c_str(), ps.c_str(), &hints, &res);
  if (rc && bind_addr.empty()) {  // no IPv6 here: all IPv4 addresses
    hints.ai_family = AF_INET;
    rc = getaddrinfo(nullptr, ps.c_str(), &hints, &res);
  }
  if (rc) throw std::runtime_error(fmt::format("--bind {}: {}", bind_addr, gai_strerror(rc)));
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  int one = 1, zero = 0;
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (res->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || (type == SOCK_STREAM && listen(fd, 64) != 0)) {
    int err = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    throw std::runtime_error(
        fmt::format("cannot listen on {} port {}: {}", bind_addr.empty() ? "*" : bind_addr, port, strerror(err)));
  }
  freeaddrinfo(res);
  return fd;
}

bool read_line(int fd, std::string& line, size_t max) {
  line.clear();
  char c;
  while (line.size() < max) {
    ssize_t r = recv(fd, &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (c == '\n') return true;
    line += c;
  }
  return false;
}

}  // namespace cptrace
