#include "record/control_socket.h"

#include "os/socket_io.h"
#include "trace/json_text.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/core.h>

namespace cptrace {

namespace {

constexpr size_t kMaxRequest = 64 * 1024;

// The address of the socket at `path`. sun_path holds at most 107 bytes, less
// than a trace directory's path may be: a longer path is reached through an
// O_PATH descriptor of its directory, as /proc/self/fd/N/NAME, which the kernel
// resolves like the path itself (permissions of the directories included). The
// descriptor stays open as long as this object, i.e. across bind() or connect().
class SocketAddress {
 public:
  explicit SocketAddress(const std::string& path) {
    addr_.sun_family = AF_UNIX;
    std::string p = path;
    if (p.size() >= sizeof(addr_.sun_path)) {
      std::filesystem::path fp(path);
      std::string dir = fp.has_parent_path() ? fp.parent_path().string() : ".";
      dir_fd_ = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dir_fd_ < 0)
        throw std::runtime_error(fmt::format("control socket {}: its directory: {}", path, strerror(errno)));
      p = fmt::format("/proc/self/fd/{}/{}", dir_fd_, fp.filename().string());
    }
    if (p.size() >= sizeof(addr_.sun_path)) {
      if (dir_fd_ >= 0) close(dir_fd_);
      throw std::runtime_error(fmt::format("control socket {}: its file name is longer than {} bytes", path,
                                           sizeof(addr_.sun_path) - 1 - (p.size() - path.size())));
    }
    std::memcpy(addr_.sun_path, p.c_str(), p.size() + 1);
  }
  ~SocketAddress() {
    if (dir_fd_ >= 0) close(dir_fd_);
  }
  SocketAddress(const SocketAddress&) = delete;
  SocketAddress& operator=(const SocketAddress&) = delete;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t size() const { return sizeof addr_; }

 private:
  sockaddr_un addr_{};
  int dir_fd_ = -1;
};

// Reads until EOF (the peer shut down its write side) or the limit; false on
// timeout or error.
bool read_all(int fd, std::string& out, int timeout_ms) {
  char buf[4096];
  while (out.size() < kMaxRequest) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf, size_t(n));
  }
  return false;
}

int connect_to(const std::string& path) {
  SocketAddress a(path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("socket: {}", strerror(errno)));
  if (connect(fd, a.get(), a.size()) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

void ControlSocket::check_address(const std::string& path) { SocketAddress a(path); }

ControlSocket::ControlSocket(std::string path, Handler handler) : path_(std::move(path)), handler_(std::move(handler)) {
  SocketAddress a(path_);
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw std::runtime_error(fmt::format("control socket {}: exists and is not a socket", path_));
    int fd = connect_to(path_);
    if (fd >= 0) {
      close(fd);
      throw std::runtime_error(fmt::format("control socket {}: another recorder is listening on it", path_));
    }
    unlink(path_.c_str());  // stale: its recorder is gone
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(fmt::format("socket: {}", strerror(errno)));
  mode_t old = umask(0077);
  int rc = bind(listen_fd_, a.get(), a.size());
  umask(old);
  if (rc != 0 || listen(listen_fd_, 8) != 0) {
    int err = errno;
    close(listen_fd_);
    throw std::runtime_error(fmt::format("control socket {}: {}", path_, strerror(err)));
  }
  if (pipe2(stop_pipe_, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", strerror(errno)));
  thread_ = std::thread([this] { loop(); });
}

ControlSocket::~ControlSocket() {
  if (write(stop_pipe_[1], "x", 1) != 1) {
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(stop_pipe_[0]);
  close(stop_pipe_[1]);
  unlink(path_.c_str());
}

void ControlSocket::loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    close(fd);
  }
}

// One request at a time: a configuration change is rare and must be atomic with
// respect to the next one.
void ControlSocket::serve(int fd) {
  std::string req;
  nlohmann::json reply;
  if (!read_all(fd, req, 2000)) {
    reply = {{"ok", false}, {"error", "incomplete request (send one JSON object, then shut down writing)"}};
  } else {
    try {
      reply = handler_(nlohmann::json::parse(req));
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"error", e.what()}};
    }
  }
  send_all(fd, json_text(reply) + "\n");
}

nlohmann::json control_request(const std::string& path, const nlohmann::json& request, int timeout_ms) {
  int fd = connect_to(path);
  if (fd < 0)
    throw std::runtime_error(
        fmt::format("cannot reach a recorder at {}: {}{}", path, strerror(errno),
                    errno == ENOENT || errno == ECONNREFUSED ? " (is `cptrace record` running for this trace?)" : ""));
  std::string reply;
  bool ok = send_all(fd, request.dump()) && shutdown(fd, SHUT_WR) == 0 && read_all(fd, reply, timeout_ms);
  close(fd);
  if (!ok) throw std::runtime_error(fmt::format("{}: no complete reply from the recorder", path));
  try {
    return nlohmann::json::parse(reply);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: reply is not JSON: {}", path, e.what()));
  }
}

}  // namespace cptrace
