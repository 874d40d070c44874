// Writes a trace directory (layout in trace_format.h): meta.json at start and
// again at finish, events.cpt as a file header plus frames. Used by the
// collector's single writer thread; not thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "trace/block_codec.h"
#include "os/output_dir.h"

namespace cptrace {

class TraceWriter {
 public:
  // Creates `dir` (and parents) and writes meta.json (with "format_version" added
  // when absent) and the events.cpt file header, never through a symlink (see
  // output_dir.h). Refuses an existing non-empty directory unless `overwrite`,
  // which removes only the trace's own files. Errors name the path and errno text.
  TraceWriter(const std::string& dir, const nlohmann::json& meta, bool overwrite = false);
  // Without finish() the file stays as a killed recorder would leave it: readable
  // up to the last written frame, meta.json as written at start.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one frame with a single writev() of header + payload, so a killed
  // process never leaves half of a frame whose write() returned. On a write error
  // the file is cut back to the last complete frame before the exception leaves.
  void write(const EncodedFrame& frame);
  // fdatasync() of events.cpt, for callers that want durability points.
  void sync();
  // Sets `bytes` of disk space aside (an unnamed file in the trace directory,
  // freed by release_reserve() or when the process dies), so that after the disk
  // fills up the recorder still has room for its last frames and meta.json.
  // Best effort: returns false, reserving nothing, where it cannot.
  bool reserve_space(uint64_t bytes);
  void release_reserve();
  // Syncs and closes events.cpt, then replaces meta.json atomically (temporary
  // file, fsync, rename, fsync of the directory).
  void finish(const nlohmann::json& final_meta);

  // Bytes of events.cpt so far, file header included.
  uint64_t bytes_written() const { return bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  std::unique_ptr<OutputDir> out_;
  std::string dir_;
  std::string events_path_;
  int fd_ = -1;
  int reserve_fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace cptrace
