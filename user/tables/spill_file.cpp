// Unnamed temporary files for spilled analysis data (spill_file.h).
#include "tables/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {
namespace {

int open_unnamed(const std::string& dir) {
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR)) return fd;
  std::string tmpl = dir + "/cptrace-spill.XXXXXX";
  fd = mkostemp(tmpl.data(), O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) unlink(tmpl.c_str());
  return fd;
}

}  // namespace

SpillFile::SpillFile(const std::string& dir, size_t buffer_bytes) : dir_(dir), buffer_bytes_(buffer_bytes) {
  fd_ = open_unnamed(dir);
  if (fd_ < 0)
    throw std::runtime_error(
        fmt::format("cannot create a temporary file in {} (for data beyond --memory): {}; "
                    "choose another with --temp-dir",
                    dir, strerror(errno)));
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) close(fd_);
}

void SpillFile::seal() {
  flush();
  std::vector<char>().swap(buf_);
}

void SpillFile::append(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  if (buf_.capacity() < buffer_bytes_) buf_.reserve(buffer_bytes_);
  if (buf_.size() + n > buffer_bytes_) flush();
  if (n >= buffer_bytes_) {
    // Written from the caller's memory: a copy would keep a buffer of n bytes
    // beyond the budget's share until seal().
    write_out(c, n);
    return;
  }
  buf_.insert(buf_.end(), c, c + n);
}

void SpillFile::flush() {
  write_out(buf_.data(), buf_.size());
  buf_.clear();
}

void SpillFile::write_out(const char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(fd_, p + done, n - done, off_t(written_ + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw std::runtime_error(
          fmt::format("writing a temporary file in {}: {}; free space there or choose "
                      "another with --temp-dir",
                      dir_, w < 0 ? strerror(errno) : "no space"));
    done += size_t(w);
  }
  written_ += n;
}

void SpillFile::read(uint64_t off, void* p, size_t n) {
  if (!buf_.empty()) flush();
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd_, static_cast<char*>(p) + done, n - done, off_t(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw std::runtime_error(
          fmt::format("reading back a temporary file in {}: {}", dir_, r < 0 ? strerror(errno) : "short file"));
    done += size_t(r);
  }
}

}  // namespace cptrace
