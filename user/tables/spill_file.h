// A temporary file for data that does not fit the memory budget: written once
// (append), then read back any number of times from any offset.
//
// Created with O_TMPFILE: the file has no name, so nothing can be raced to it
// (no symlink, no guessed path), nobody else can open it, and the kernel frees it
// when the descriptor closes -- at exit, on a signal, on SIGKILL too: no exit path
// leaves it behind. A file system without O_TMPFILE gets an O_EXCL|O_NOFOLLOW
// name from mkstemp that is unlinked at once (the same lifetime).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cptrace {

class SpillFile {
 public:
  // Throws std::runtime_error naming `dir` and errno when no file can be made.
  explicit SpillFile(const std::string& dir, size_t buffer_bytes = 1 << 20);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  void append(const void* p, size_t n);
  // Bytes appended so far (buffered ones included).
  uint64_t size() const { return written_ + buf_.size(); }
  // Writes out pending appends and frees the write buffer (appending again
  // allocates it anew): a finished file costs no memory.
  void seal();
  // Reads [off, off + n) of what was appended; flushes pending appends first.
  void read(uint64_t off, void* p, size_t n);

 private:
  void flush();
  void write_out(const char* p, size_t n);  // at written_, then counted
  int fd_ = -1;
  std::string dir_;
  uint64_t written_ = 0;
  size_t buffer_bytes_;
  std::vector<char> buf_;
};

// Sequential reader of fixed-size records in [begin, end) of a SpillFile, with
// its own buffer of `buffer_bytes`.
template <typename T>
class SpillReader {
 public:
  SpillReader(SpillFile& f, uint64_t begin, uint64_t end, size_t buffer_bytes)
      : f_(&f), next_(begin), end_(end), buf_(std::max<size_t>(1, buffer_bytes / sizeof(T))) {}
  // The next record, or nullptr at the end.
  const T* next() {
    if (pos_ == have_) {
      uint64_t left = (end_ - next_) / sizeof(T);
      if (!left) return nullptr;
      have_ = size_t(std::min<uint64_t>(left, buf_.size()));
      f_->read(next_, buf_.data(), have_ * sizeof(T));
      next_ += have_ * sizeof(T);
      pos_ = 0;
    }
    return &buf_[pos_++];
  }

 private:
  SpillFile* f_;
  uint64_t next_, end_;
  std::vector<T> buf_;
  size_t pos_ = 0, have_ = 0;
};

}  // namespace cptrace
