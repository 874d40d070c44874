// Following a recorded process tree (record -p / -- CMD, unless --no-inherit).
//
// The kernel reports each fork of a followed process (bpf/cptrace.bpf.c,
// proc_events); this stage attaches the uprobes to the child's pid and detaches
// them when the child ends. Meanwhile the child waits in libcptrace until its
// file below says that it is attached (lib/follow_wait.c), so none of its
// events escapes. Whom we follow is told to the children through one file per
// process in kFollowDir, holding our pid, named so that a process in a
// container can find its own (lib/follow_wait.c); a file left by a killed
// recorder is ignored (its pid is gone, its lock released) and removed by the
// next recorder.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collect/ring_waiter.h"
#include "record/hello_responder.h"
#include "trace/pid_table.h"

struct ring_buffer;

namespace cptrace {

class Probes;

inline constexpr const char* kFollowDir = "/run/cptrace/follow";  // = CP_FOLLOW_DIR (lib/cp_internal.h)

class ProcessFollower {
 public:
  // Marks `root` as followed (before it can fork) and starts the thread.
  // on_attached: called on that thread with each child once attached to, while
  // it waits for us, with its pid in its own namespace (read_namespace_pid(),
  // nullopt if gone meanwhile).
  using AttachedFn = std::function<void(pid_t, const std::optional<PidEntry>&)>;
  ProcessFollower(Probes& probes, pid_t root, AttachedFn on_attached = {});
  // Stops the thread and removes every file this recorder wrote.
  ~ProcessFollower();
  ProcessFollower(const ProcessFollower&) = delete;
  ProcessFollower& operator=(const ProcessFollower&) = delete;

  uint64_t forks_followed() const { return forks_; }
  uint64_t forks_missed() const { return missed_; }  // gone before we could attach
  // The hello of the tree's processes: a child that execs a program with
  // another copy of the library (a container's) gets it attached.
  const HelloResponder& hello() const { return hello_; }

 private:
  static int on_record(void* self, void* data, size_t size);
  void run();
  void release();  // files and descriptors
  void lock_running();
  void mark(pid_t pid, const std::optional<PidEntry>& ns);
  void unmark(pid_t pid);

  Probes& probes_;
  HelloResponder hello_;
  AttachedFn on_attached_;
  int dir_fd_ = -1;
  ring_buffer* rb_ = nullptr;
  std::unique_ptr<RingWaiter> waiter_;
  int lock_fd_ = -1;
  std::string lock_name_;
  std::map<pid_t, std::vector<std::string>> marked_;  // file names; touched by the thread only, after the constructor
  std::atomic<uint64_t> forks_{0}, missed_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Removes the files of recorders that are gone; exposed for the tests.
void remove_stale_follow_files(int dir_fd);

}  // namespace cptrace
