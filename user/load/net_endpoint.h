// HOST:PORT parsing and the few socket calls the load generator, the sink and
// its control channel share (IPv4 and IPv6, names through getaddrinfo).
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace cptrace {

struct Endpoint {
  std::string host;  // name, IPv4, or IPv6 (written [v6]:port on the command line)
  uint16_t port = 0;
  std::string str() const;
};

// "host:port", "[v6]:port". Throws naming `flag` and the bad value.
Endpoint parse_endpoint(const std::string& s, const std::string& flag);
// A connected socket (SOCK_STREAM or SOCK_DGRAM). Throws with the reason.
int connect_to(const Endpoint& e, int type);
// A bound socket on `port` (all addresses, IPv6 dual-stack when available);
// listening if SOCK_STREAM. Throws with the reason.
int listen_on(const std::string& bind_addr, uint16_t port, int type);
// One text line ('\n' excluded) from a blocking socket; false on EOF/error/timeout.
bool read_line(int fd, std::string& line, size_t max = 1 << 20);

}  // namespace cptrace
