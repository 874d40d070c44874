// See trace_file.h.
#include "trace/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trace/trace_format.h"

namespace cptrace {
namespace {

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_trace_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below);
  // for a regular file the flag changes nothing.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw TraceError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    throw TraceError(path, 0, "cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw TraceError(path, 0, std::string("not a regular file (") + kind_of(st.st_mode) + ")");
  }
  return fd;
}

std::string read_trace_file(const std::string& path) {
  int fd = open_trace_file(path);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      uint64_t at = text.size();
      ::close(fd);
      throw TraceError(path, at, "cannot read: " + why);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

bool read_trace_bytes(int fd, const std::string& path, uint64_t off, void* dst, size_t n) {
  auto p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw TraceError(path, off, std::string("cannot read: ") + std::strerror(errno));
    if (r == 0) return false;
    p += r, off += static_cast<uint64_t>(r), n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace cptrace
