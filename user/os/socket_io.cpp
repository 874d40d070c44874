#include "os/socket_io.h"

#include <sys/socket.h>

#include <cerrno>

namespace cptrace {

bool send_all(int fd, std::string_view bytes) {
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

}  // namespace cptrace
