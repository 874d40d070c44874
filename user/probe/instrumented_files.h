// Which files mapped by the processes of the node hold cptrace probe sites
// (record --all, and the hello of a process: include/cptrace_records.h).
//
// A file is recognised by its content (it defines cp_logTS), never by its
// path: a container's own copy of libcptrace.so is another file at a path
// only its mount namespace has. Each file is checked once, keyed by the device
// and inode its maps line shows, so a node of thousands of processes costs one
// read of each /proc/PID/maps and one ELF check per distinct executable file.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cptrace {

struct MappedFile {
  uint64_t dev = 0, ino = 0;  // as /proc/PID/maps shows them
  std::string path;  // a path that opens it from here (path_to_mapped_file())
};

// The file `pid` maps at address `addr` (nullopt: no file there, or gone).
std::optional<MappedFile> mapped_file_at(pid_t pid, uint64_t addr);

// Every process of the node (its /proc entries), in no order.
std::vector<pid_t> all_processes();

class InstrumentedFiles {
 public:
  // True if the file defines the probe site; the ELF is read once per file.
  bool holds_probe_site(const MappedFile& f);
  // Every executable file mapping of `pid` that holds the probe site, once each.
  std::vector<MappedFile> of_process(pid_t pid);
  size_t files_checked() const { return verdict_.size(); }

 private:
  std::map<std::pair<uint64_t, uint64_t>, bool> verdict_;
};

}  // namespace cptrace
