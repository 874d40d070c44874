// Output files created relative to a directory descriptor (see output_dir.h).
#include "os/output_dir.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cptrace {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err = errno) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(err));
}

bool ends_with(const std::string& s, const char* tail) {
  size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

std::string strip_tmp(const std::string& n) { return ends_with(n, ".tmp") ? n.substr(0, n.size() - 4) : n; }

bool trace_owns(const std::string& name) {
  std::string n = strip_tmp(name);
  return n == "events.cpt" || n == "meta.json" || name == ".space-reserve";
}

bool ctf_owns(const std::string& name) {
  std::string n = strip_tmp(name);
  return n == "metadata" || n.rfind("stream_", 0) == 0;
}

// "dir/" would follow a symlink named dir despite O_NOFOLLOW.
std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::vector<std::string> entries(int dirfd, const std::string& path) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot read directory");
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int err = errno;
    ::close(fd);
    fail(path, "cannot read directory", err);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

}  // namespace

const OutputKind kTraceOutput{"trace", "events.cpt", trace_owns};
const OutputKind kCtfOutput{"CTF trace", "metadata", ctf_owns};

OutputDir::OutputDir(const std::string& path, const OutputKind& kind, bool overwrite) : path_(strip_slashes(path)) {
  std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw std::runtime_error(parent.string() + ": cannot create: " + ec.message());
  bool created = ::mkdir(path_.c_str(), 0755) == 0;
  if (!created && errno != EEXIST) fail(path_, "cannot create directory");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) {
    struct stat st;
    if (errno == ELOOP || (::lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)))
      throw std::runtime_error(path_ + ": is a symlink; refusing to write through it");
    if (errno == ENOTDIR) throw std::runtime_error(path_ + ": exists and is not a directory");
    fail(path_, "cannot open as a directory");
  }
  if (created) return;
  auto names = entries(fd_, path_);
  if (names.empty()) return;
  if (!overwrite) {
    ::close(fd_);
    fd_ = -1;
    bool ours = false;
    for (const auto& n : names) ours |= n == kind.marker;
    if (ours) throw std::runtime_error(path_ + ": already holds a " + kind.what + " (use -f to overwrite)");
    throw std::runtime_error(path_ + ": exists and is not empty (not a " + std::string(kind.what) +
                             "); refusing to write into it (use -f to add a " + kind.what + " to it)");
  }
  for (const auto& n : names)
    if (kind.owns(n) && ::unlinkat(fd_, n.c_str(), 0) != 0 && errno != ENOENT) {
      int err = errno;
      ::close(fd_);
      fd_ = -1;
      fail(path_of(n), "cannot remove", err);
    }
}

OutputDir::~OutputDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::string OutputDir::path_of(const std::string& name) const { return path_ + "/" + name; }

int OutputDir::create(const std::string& name, int mode) const {
  int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST)
      throw std::runtime_error(path_of(name) +
                               ": already exists (a file or symlink put there "
                               "while writing?); refusing to write through it");
    fail(path_of(name), "cannot create");
  }
  return fd;
}

void OutputDir::replace(const std::string& name, const std::string& content) const {
  std::string tmp = name + ".tmp";
  if (::unlinkat(fd_, tmp.c_str(), 0) != 0 && errno != ENOENT) fail(path_of(tmp), "cannot remove");
  int fd = create(tmp);
  for (size_t off = 0; off < content.size();) {
    ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int err = errno;
      ::close(fd);
      fail(path_of(tmp), "cannot write", err);
    }
    off += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    fail(path_of(tmp), "cannot fsync", err);
  }
  if (::close(fd) != 0) fail(path_of(tmp), "cannot close");
  // renameat replaces a symlink at `name` itself, never its target.
  if (::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) fail(path_of(name), "cannot rename " + tmp + " to it");
  sync();
}

void OutputDir::sync() const {
  if (::fsync(fd_) != 0) fail(path_, "cannot fsync");
}

int open_output_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a reader (it is refused below).
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) throw std::runtime_error(path + ": is a symlink; refusing to write through it");
    fail(path, "cannot create");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + ": is not a regular file; refusing to write to it");
  }
  // Truncated only now, when known to be a regular file of our own opening.
  if (::ftruncate(fd, 0) != 0 || ::fcntl(fd, F_SETFL, 0) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, "cannot truncate", err);
  }
  return fd;
}

}  // namespace cptrace
