// Uprobes that grow to a process tree (record -p / -- CMD, following children).
//
// Each probe site is one uprobe event of this recorder's tracefs group
// (cptrace_<recorder pid>). The BPF program goes on one perf event of it, for
// the recorded process; each process of the tree then gets one more perf event
// of the same uprobe, without a program: the kernel keeps one list of the
// processes a uprobe event covers, puts breakpoints in their memory only, and
// runs the uprobe's programs for a hit in any of them. Compared with one
// uprobe per process (what libbpf attaches with a pid), a hit asks one list
// instead of one uprobe consumer per followed process (about 50 ns each,
// measured), and removing an ended process is closing a file descriptor
// instead of unregistering uprobes (about 50 ms each, serialised by the
// kernel, measured).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cptrace {

class TracefsUprobes {
 public:
  // Finds tracefs (mounting it on /sys/kernel/tracing when nothing is mounted)
  // and removes the groups of recorders that died without cleaning up.
  TracefsUprobes();
  ~TracefsUprobes() { remove_all(); }
  TracefsUprobes(const TracefsUprobes&) = delete;
  TracefsUprobes& operator=(const TracefsUprobes&) = delete;

  // Creates the uprobe event for `path`+`file_offset`; returns its index.
  size_t add(const std::string& path, uint64_t file_offset);
  // A perf event of uprobe `index` scoped to process `pid` (-1 on failure,
  // errno set). The caller owns the descriptor.
  int open(size_t index, pid_t pid) const;
  size_t size() const { return ids_.size(); }
  // Removes the events; every descriptor open() gave must be closed first.
  void remove_all();

 private:
  std::string tracefs_;  // e.g. /sys/kernel/tracing
  std::string group_;  // cptrace_<pid>
  std::vector<std::string> names_;
  std::vector<int> ids_;
};

// Groups named cptrace_<pid> whose recorder is gone; exposed for the tests.
std::vector<std::string> stale_uprobe_groups(const std::string& tracefs);

}  // namespace cptrace
