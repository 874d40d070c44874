// Loads bpf/cptrace.bpf.c, creates one ring buffer per CPU and attaches the
// uprobes to the nop5 of the application library's probe sites (each checked:
// probe/probe_site.h) in every target ELF
// (a libcptrace.so, or an executable linked with libcptrace.a).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "probe/bpf_load_log.h"
#include "probe/kernel_features.h"
#include "collect/stage_flush.h"
#include "trace/trace_format.h"

struct cptrace_bpf;
struct bpf_link;
struct bpf_program;

namespace cptrace {

class TracefsUprobes;

struct ProbeOptions {
  std::vector<std::string> targets;  // ELF files holding cp_logTS
  uint32_t filter_tgid = 0;  // 0: every process; else uprobes in it only
  // With filter_tgid: also the processes it forks from now on, each attached
  // by pid when the kernel reports its fork (attach_process()).
  bool follow = false;
  uint32_t ring_bytes = 16u << 20;  // per CPU, power of two
  uint64_t wakeup_bytes = 1u << 20;  // BPF wakes the drain past this fill
  // Called after the programs are loaded, before any uprobe is attached (the
  // recorder installs channel handlers here, so no event escapes them).
  std::function<void(class Probes&)> before_attach;
  bool allow_no_targets = false;  // record --net alone: load, attach nothing
  // record --all: every process, no pid filter; targets are added as processes
  // say hello (add_target()); none at start is fine.
  bool all = false;
};

class Probes {
 public:
  explicit Probes(const ProbeOptions& opt);
  ~Probes();
  Probes(const Probes&) = delete;
  Probes& operator=(const Probes&) = delete;

  const std::vector<int>& ring_fds() const { return ring_fds_; }
  // Empties the per-CPU stages of single events (for the ring drain).
  StageFlusher* stage() { return stage_.get(); }
  // Removes every uprobe; the rings stay readable.
  void detach();
  // Per-CPU seen/dropped counts (events).
  Counters read_counters() const;
  // Channel handler maps (user/probe/handlers.h) and the switch that turns them on.
  int handlers_fd() const;
  int last_slots_fd() const;
  int count_slots_fd() const;
  void enable_handlers();
  // Following the tree: the ring of cp_proc_rec (-1 when not following), and
  // attaching to / detaching from one process of it. attach_process() returns
  // false when the process is already gone. detach_process() closes
  // descriptors only (tracefs_uprobes.h says why that is cheap).
  int proc_events_fd() const;
  int followed_map_fd() const;  // the tgid set (-1 when not following)
  bool attach_process(uint32_t tgid);
  void detach_process(uint32_t tgid);
  // A file found after the start (a process said hello: include/cptrace_records.h):
  // attached for every process (all) or, following, for `tgid` (which gets it
  // first) and every process of the tree forked from now on. Throws as the
  // attach at start does; false when already detached (stopping).
  bool add_target(const std::string& path, uint32_t tgid);
  // Following: opens what `tgid` lacks of the uprobe events added since it was
  // attached (a file another process of the tree brought). False if gone.
  bool cover_process(uint32_t tgid);
  // True once the hello program is attached (not on a kernel without syscall
  // tracepoints: the tree then waits on its follow marks only).
  bool hello_attached() const { return hello_link_ != nullptr; }
  // Every target added by add_target(), in order.
  std::vector<std::string> added_targets() const;
  // A counter of bpf/cptrace.bpf.c summed over CPUs (enum cp_counter).
  uint64_t counter_total(uint32_t idx) const;
  // The files attached at the start.
  const std::vector<std::string>& targets() const { return targets_; }
  // "path:symbol" for every attached probe.
  const std::vector<std::string>& attached() const { return attached_; }

 private:
  void attach_target(const std::string& path, uint32_t tgid);
  bpf_link* attach_site(bpf_program* prog, const std::string& path, uint64_t file_offset, uint64_t cookie,
                        uint32_t tgid);
  void start_following(uint32_t root);
  void attach_hello(bool required);
  bool open_missing(uint32_t tgid, std::vector<int>& fds);
  void attach_exit_handover();

  cptrace_bpf* skel_ = nullptr;
  std::unique_ptr<StageFlusher> stage_;
  std::vector<int> ring_fds_;
  std::vector<bpf_link*> links_;
  bool follow_ = false;
  bool all_ = false;
  bool detached_ = false;
  bpf_link* hello_link_ = nullptr;
  std::vector<std::string> added_;  // under proc_mu_
  std::vector<std::string> targets_;
  mutable std::mutex proc_mu_;  // the follower thread attaches while stop detaches
  std::unique_ptr<TracefsUprobes> tracefs_;  // following: the uprobe events
  // Following: perf events per process, one per uprobe event in index order
  // (-1: covered by the event carrying the programs, opened for that process)
  std::map<uint32_t, std::vector<int>> proc_fds_;
  std::vector<bpf_link*> follow_links_;  // the fork/exit tracepoints
  std::vector<std::string> attached_;
};

// The variant of each program that touches the per-CPU stage: staged (needs
// the bpf_preempt_disable kfunc, 6.10+) or not (bpf/cptrace.bpf.c, CP_STAGE_VARIANT).
struct StagePrograms {
  bpf_program *logTS, *jni_logTS, *batch_submit, *channel_announce, *channel_closed;
  bpf_program *tbuf_exit, *tbuf_exit_sys, *tbuf_exit_group, *tbuf_exit_sig;
};
StagePrograms stage_programs(cptrace_bpf* skel, bool staged);

// Sets the object's constants and autoload flags for the running kernel
// (kernel_features.h): the thread-exit hand-over only with thread buffers to
// hand over, the fork/exit tracepoints only when following a tree.
// `hello`: the program answering the hello of new processes (followed ones, or
// every one with record --all).
void configure_for_kernel(cptrace_bpf* skel, bool thread_buffers, bool follow, bool hello = false);

}  // namespace cptrace
