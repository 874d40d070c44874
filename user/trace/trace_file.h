// Opening the files of a trace directory (events.cpt, meta.json) for reading.
//
// A trace directory comes from anywhere (copied, untarred, hand-made), so its
// files may be FIFOs, devices or directories: opening a FIFO for reading blocks
// until a writer appears, and reading a device may never end. Every reader of
// trace files opens them here, which accepts only regular files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cptrace {

// A read-only descriptor (O_CLOEXEC) of the regular file at `path` (a symlink to
// one is followed). Throws TraceError naming the path, at byte 0, when it cannot
// be opened or is not a regular file; never blocks on a FIFO.
int open_trace_file(const std::string& path);

// Exactly n bytes at offset `off` of descriptor fd (pread, EINTR retried); false
// when the file ends first. Throws TraceError naming path and offset on an error.
bool read_trace_bytes(int fd, const std::string& path, uint64_t off, void* dst, size_t n);

// The whole of the regular file at `path`, opened by open_trace_file.
std::string read_trace_file(const std::string& path);

}  // namespace cptrace
