// Creating output files without following symlinks.
//
// cptrace often runs as root and writes into directories other users can write
// to (/tmp, a shared results folder). A name planted there as a symlink must not
// make it overwrite or create a file elsewhere. So an output directory is opened
// once (O_DIRECTORY|O_NOFOLLOW) and every file is created relative to that
// descriptor with O_CREAT|O_EXCL|O_NOFOLLOW; files are replaced by writing a
// temporary and renameat(); old files are removed only by their known names with
// unlinkat(), which removes a symlink itself, never its target. Every command
// that writes goes through here (or open_output_file for a single file).
#pragma once
#include <string>

namespace cptrace {

// The files one kind of output owns in its directory.
struct OutputKind {
  const char* what;  // for messages: "trace", "CTF trace"
  const char* marker;  // a file whose presence says the directory holds one
  bool (*owns)(const std::string& name);  // its files and temporaries
};

extern const OutputKind kTraceOutput;  // events.cpt, meta.json (+ .tmp)
extern const OutputKind kCtfOutput;  // metadata, stream_* (+ .tmp)

class OutputDir {
 public:
  // Creates `path` (and parents) or opens an existing directory. The last
  // component must not be a symlink. An existing directory must be empty unless
  // `overwrite`; with it, only the files `kind` owns are removed (unlinkat, a
  // symlink is removed, not followed) and anything else is left alone.
  // Errors name the path.
  OutputDir(const std::string& path, const OutputKind& kind, bool overwrite);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // A new file `name` (O_WRONLY, O_CLOEXEC); fails, naming it, when the name
  // exists in any form (file, symlink, dangling symlink).
  int create(const std::string& name, int mode = 0644) const;
  // Replaces `name` atomically: `name`.tmp (a stale one removed first), fsync,
  // renameat over `name`, fsync of the directory.
  void replace(const std::string& name, const std::string& content) const;
  void sync() const;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& name) const;

 private:
  std::string path_;
  int fd_ = -1;
};

// A single output file (report, json/csv export) opened for writing: created
// 0644, or an existing regular file truncated. Refuses a symlink at `path` and
// anything that is not a regular file (FIFO, device, directory), naming it.
int open_output_file(const std::string& path);

}  // namespace cptrace
