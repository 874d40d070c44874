// Trace directory writer. Durability rules: a frame is one writev(); meta.json is
// only ever replaced by rename(), so a reader never sees half of either.
#include "trace/trace_writer.h"
#include "trace/json_text.h"

#include <cerrno>
#include <system_error>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

namespace cptrace {
namespace {

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path);
}

// Writes all of iov[0..n), continuing after short writes and EINTR.
void write_all(int fd, iovec* iov, int n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", path);
    }
    auto left = static_cast<size_t>(w);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
}

void write_all(int fd, const std::string& data, const std::string& path) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  write_all(fd, &iov, 1, path);
}

std::string meta_text(const nlohmann::json& meta) {
  nlohmann::json m = meta.is_null() ? nlohmann::json::object() : meta;
  if (m.is_object() && !m.contains("format_version")) m["format_version"] = kFormatVersion;
  return json_text(m, 2) + "\n";
}

}  // namespace

TraceWriter::TraceWriter(const std::string& dir, const nlohmann::json& meta, bool overwrite)
    : out_(std::make_unique<OutputDir>(dir, kTraceOutput, overwrite)),
      dir_(dir),
      events_path_(out_->path_of("events.cpt")) {
  out_->replace("meta.json", meta_text(meta));
  fd_ = out_->create("events.cpt");
  std::string header = file_header_bytes();
  try {
    write_all(fd_, header, events_path_);
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  bytes_ = header.size();
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) ::close(fd_);
  release_reserve();
}

bool TraceWriter::reserve_space(uint64_t bytes) {
  release_reserve();
  // O_TMPFILE: never visible, so a killed recorder leaves nothing behind; where a
  // file system lacks it, a named file unlinked at once does the same.
  int fd = ::openat(out_->fd(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    fd = ::openat(out_->fd(), ".space-reserve", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::unlinkat(out_->fd(), ".space-reserve", 0);
  }
  // posix_fallocate allocates real blocks (glibc writes them where the file
  // system has no fallocate), unlike ftruncate, which would leave a hole.
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    return false;
  }
  reserve_fd_ = fd;
  return true;
}

void TraceWriter::release_reserve() {
  if (reserve_fd_ >= 0) ::close(reserve_fd_);
  reserve_fd_ = -1;
}

void TraceWriter::write(const EncodedFrame& frame) {
  if (fd_ < 0) throw std::logic_error("TraceWriter::write after finish");
  iovec iov[2] = {{const_cast<FrameHeader*>(&frame.hdr), sizeof frame.hdr},
                  {const_cast<uint8_t*>(frame.payload.data()), frame.payload.size()}};
  try {
    write_all(fd_, iov, 2, events_path_);
  } catch (...) {
    // Best effort: drop the partial frame so later frames are not hidden behind it.
    if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) ::lseek(fd_, 0, SEEK_END);
    throw;
  }
  bytes_ += sizeof frame.hdr + frame.payload.size();
}

void TraceWriter::sync() {
  if (fd_ >= 0 && ::fdatasync(fd_) != 0) throw_errno("cannot fdatasync", events_path_);
}

void TraceWriter::finish(const nlohmann::json& final_meta) {
  if (fd_ < 0) throw std::logic_error("TraceWriter::finish called twice");
  sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_errno("cannot close", events_path_);
  out_->replace("meta.json", meta_text(final_meta));
}

}  // namespace cptrace
