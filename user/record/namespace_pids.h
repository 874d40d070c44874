// The pid each recorded process has in its own pid namespace (a container's),
// read from /proc when the recording first meets the process, written into the
// trace as Processes frames (trace/pid_table.h) and into meta.json.
//
// First met: the -p process or the command at start, each child the follower
// attaches to (it is alive then: it waits for us), and each new pid the ring
// drain decodes (--lib alone). A process gone before it was met this way (a
// short-lived one under --lib) keeps only its host pid in the trace.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/block_codec.h"
#include "trace/pid_table.h"

namespace cptrace {

// Host pid `pid`'s pid in its own (innermost) pid namespace (NStgid: in
// /proc/PID/status) and that namespace's inode; nullopt when the process is gone.
std::optional<PidEntry> read_namespace_pid(uint32_t pid);
// The inode of our own pid namespace.
uint64_t own_pid_namespace();

class NamespacePids {
 public:
  NamespacePids();
  // Called from the drain, follower and main threads; each pid is read once.
  void add(uint32_t pid);
  // The same with the entry read already (the follower's; nullopt: gone).
  void add(uint32_t pid, const std::optional<PidEntry>& e);
  // Entries not yet written, as a frame (false: nothing new).
  bool take_pending(EncodedFrame& f);
  nlohmann::json all_json();

 private:
  std::mutex mu_;
  std::set<uint32_t> met_;
  std::vector<PidEntry> pending_;
  PidTable all_;
};

}  // namespace cptrace
