// Answering the hello of a process that loaded libcptrace
// (include/cptrace_records.h, lib/recorder_hello.c).
//
// The process waits (bounded) until we write CP_HELLO_ATTACHED into it. Before
// that, the file holding the site it names is attached: a file met for the
// first time (a container's own copy of the library, a library loaded with
// dlopen or System.load) gets its uprobes, for every process (record --all)
// or, following a tree, for this process; a file attached already costs one
// read of the process's maps. With --all, scan_node() attaches, at the start,
// every instrumented file that any process maps.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cptrace_records.h"
#include "probe/instrumented_files.h"

namespace cptrace {

class Probes;

class HelloResponder {
 public:
  // `targets`: the files attached at the start.
  HelloResponder(Probes& probes, const std::vector<std::string>& targets);
  // From the proc_events ring's thread.
  void on_hello(const cp_proc_rec& r);
  // record --all at the start, beside that thread: every instrumented file of
  // every process.
  void scan_node();

  // The processes scan_node() found using an instrumented file.
  const std::vector<pid_t>& scanned() const { return scanned_; }
  uint64_t answered() const { return answered_; }
  uint64_t unanswered() const { return unanswered_; }  // gone, or its library unusable
  uint64_t files_checked() const { return files_checked_; }
  // How long the answered processes waited, from their hello to our answer:
  // {"count", "median_us", "p99_us", "max_us"}.
  nlohmann::json wait_json() const;

 private:
  bool attach(const MappedFile& f, uint32_t tgid);

  Probes& probes_;
  mutable std::mutex mu_;  // the scan, the ring's thread and the summary
  InstrumentedFiles files_;
  std::vector<pid_t> scanned_;
  std::vector<uint32_t> waits_us_;  // the first kMaxWaits answers
  std::set<std::pair<uint64_t, uint64_t>> attached_;  // stat() device and inode of each attached file
  std::atomic<uint64_t> answered_{0}, unanswered_{0}, files_checked_{0};
  std::atomic<bool> warned_eperm_{false};  // the missing-privilege warning, printed once
  std::set<std::string> unreadable_;  // libraries said unreadable, each once
};

// Writes CP_HELLO_ATTACHED into process `pid`'s struct cp_hello at `hello`.
bool answer_hello(pid_t pid, uint64_t hello);

}  // namespace cptrace
