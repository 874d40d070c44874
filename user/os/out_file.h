// An output file for the exporters and the report: buffered stdio, and every
// write or close error turned into an exception naming the path. Opened through
// output_dir.h, so it never writes through a symlink.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

#include "os/output_dir.h"

namespace cptrace {

class OutFile {
 public:
  // A single output file: see open_output_file.
  explicit OutFile(const std::string& path) : OutFile(open_output_file(path), path) {}
  // A new file `name` in an output directory: see OutputDir::create.
  OutFile(const OutputDir& dir, const std::string& name) : OutFile(dir.create(name), dir.path_of(name)) {}
  // The process's stdout, through a duplicate descriptor: close() flushes and
  // reports errors (a reader gone: EPIPE) without closing fd 1 itself.
  struct Stdout {};
  explicit OutFile(Stdout) : OutFile(::dup(STDOUT_FILENO), "stdout") {}
  ~OutFile() {
    if (f_) std::fclose(f_);
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  void write(std::string_view s) { write(s.data(), s.size()); }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail("write");
  }
  void close() {
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) fail("close");
  }
  const std::string& path() const { return path_; }

 private:
  OutFile(int fd, const std::string& path) : path_(path) {
    f_ = fd < 0 ? nullptr : ::fdopen(fd, "wb");
    if (!f_) {
      int err = errno;
      if (fd >= 0) ::close(fd);
      throw std::runtime_error(path + ": cannot open: " + std::strerror(err));
    }
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(path_ + ": cannot " + what + ": " + std::strerror(errno));
  }
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace cptrace
