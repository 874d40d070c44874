// An output file for the exporters and the report: buffered stdio, and every
// write or close error turned into an exception naming the path.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cptrace {

class OutFile {
 public:
  explicit OutFile(const std::string& path) : path_(path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
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
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(path_ + ": cannot " + what + ": " + std::strerror(errno));
  }
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace cptrace
