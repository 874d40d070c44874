#include "probe/probe_attach.h"

#include "probe/link_release.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "cptrace.skel.h"
#include "cptrace_records.h"
#include "probe/bpf_load_log.h"
#include "probe/per_cpu_rings.h"
#include "probe/probe_site.h"
#include "probe/tracefs_uprobes.h"
#include "probe/proc_registry.h"

namespace cptrace {

Probes::Probes(const ProbeOptions& opt) {
  if (opt.targets.empty() && !opt.allow_no_targets)
    throw std::runtime_error("no target library or executable to attach to");
  targets_ = opt.targets;
  PendingRings rings(opt.ring_bytes, "cp_ring", "a ring buffer");  // made while the programs load
  skel_ = cptrace_bpf::open();
  if (!skel_) throw std::runtime_error(explain_bpf_error(errno, "opening the BPF object"));
  follow_ = opt.follow && opt.filter_tgid;
  all_ = opt.all;
  // Following, the uprobes are scoped by pid to each process of the tree, whose
  // tgids the BPF side cannot know in advance: it filters nothing then.
  skel_->rodata->filter_tgid = follow_ || all_ ? 0 : opt.filter_tgid;
  skel_->rodata->hello_all = all_;
  bool hello = (follow_ || all_) && kernel_features().syscall_tracepoints;
  configure_for_kernel(skel_, !opt.targets.empty() || all_, follow_, hello);
  skel_->rodata->wakeup_bytes = opt.wakeup_bytes;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error(explain_bpf_error(ncpu, "counting CPUs"));
  bpf_map__set_max_entries(skel_->maps.rings, ncpu);
  // The inner-map template keeps its compiled size: the kernel does not compare
  // ring sizes when we install our own rings into the array.
  {
    BpfLoadLog log;
    if (int err = cptrace_bpf::load(skel_))
      throw std::runtime_error(explain_load_failure(err, log.text(), "loading the BPF programs"));
  }
  ring_fds_ = rings.install(bpf_map__fd(skel_->maps.rings));
  if (kernel_features().preempt_kfunc) {
    try {
      stage_ = std::make_unique<StageFlusher>(skel_->progs.cp_stage_flush, bpf_map__fd(skel_->maps.stages));
    } catch (const std::system_error& e) {
      throw std::runtime_error(explain_bpf_error(e.code().value(), "running the stage flush program"));
    }
  }
  if (opt.before_attach) opt.before_attach(*this);
  if (follow_) start_following(opt.filter_tgid);
  if (hello)
    attach_hello(all_);
  else if (all_)
    throw std::runtime_error(
        fmt::format("record --all needs the syscall tracepoints (CONFIG_FTRACE_SYSCALLS), which Linux {} lacks",
                    kernel_features().release));
  for (const auto& t : opt.targets) attach_target(t, opt.filter_tgid);
  if (follow_ && tracefs_) proc_fds_[opt.filter_tgid] = std::vector<int>(tracefs_->size(), -1);
  if (!opt.targets.empty() || all_) attach_exit_handover();
}

// The hello (include/cptrace_records.h): a new process of ours tells us where
// its library is and waits for us. Without it, record --all could not learn of
// libraries loaded later; following, the follow marks still work.
void Probes::attach_hello(bool required) {
  hello_link_ = bpf_program__attach(skel_->progs.cp_hello);
  if (!hello_link_ && required)
    throw std::runtime_error(explain_bpf_error(errno, "attaching the hello program (syscalls:sys_enter_prctl)"));
}

// Only the programs this kernel can run are loaded (kernel_features.h); the
// constants tell the others which path to take.
StagePrograms stage_programs(cptrace_bpf* skel, bool staged) {
  auto& p = skel->progs;
  if (staged)
    return {p.cp_logTS,     p.cp_jni_logTS,     p.cp_batch_submit,    p.cp_channel_announce, p.cp_channel_closed,
            p.cp_tbuf_exit, p.cp_tbuf_exit_sys, p.cp_tbuf_exit_group, p.cp_tbuf_exit_sig};
  return {p.cp_logTS_u,          p.cp_jni_logTS_u, p.cp_batch_submit_u,  p.cp_channel_announce_u,
          p.cp_channel_closed_u, p.cp_tbuf_exit_u, p.cp_tbuf_exit_sys_u, p.cp_tbuf_exit_group_u,
          p.cp_tbuf_exit_sig_u};
}

void configure_for_kernel(cptrace_bpf* skel, bool thread_buffers, bool follow, bool hello) {
  const KernelFeatures& k = kernel_features();
  skel->rodata->stage_singles = k.preempt_kfunc;
  skel->rodata->have_bpf_loop = k.bpf_loop;
  for (bool staged : {false, true}) {
    StagePrograms sp = stage_programs(skel, staged);
    bool on = staged == k.preempt_kfunc;
    for (bpf_program* p : {sp.logTS, sp.jni_logTS, sp.batch_submit, sp.channel_announce, sp.channel_closed})
      bpf_program__set_autoload(p, on);
    // sched_process_exit before exit_mm sees every ending with the buffer still
    // readable; the older kernels' hooks are classic tracepoints, each of which
    // costs the stop a kernel grace period under one mutex (link_release.h).
    bool early_exit = on && thread_buffers && k.exit_before_mm;
    bool classic_exits = on && thread_buffers && !k.exit_before_mm;
    bpf_program__set_autoload(sp.tbuf_exit, early_exit);
    bpf_program__set_autoload(sp.tbuf_exit_sys, classic_exits && k.syscall_tracepoints);
    bpf_program__set_autoload(sp.tbuf_exit_group, classic_exits && k.syscall_tracepoints);
    bpf_program__set_autoload(sp.tbuf_exit_sig, classic_exits);
  }
  bpf_program__set_autoload(skel->progs.cp_stage_flush, k.preempt_kfunc);
  bpf_program__set_autoload(skel->progs.cp_follow_fork, follow);
  bpf_program__set_autoload(skel->progs.cp_follow_exit, follow);
  bpf_program__set_autoload(skel->progs.cp_hello, hello);
}

// Thread buffers left behind when a thread ends (bpf/cptrace.bpf.c): every
// hook this kernel has, the first to see a buffer hands it over.
void Probes::attach_exit_handover() {
  StagePrograms sp = stage_programs(skel_, kernel_features().preempt_kfunc);
  for (bpf_program* p : {sp.tbuf_exit_sys, sp.tbuf_exit_group, sp.tbuf_exit_sig, sp.tbuf_exit}) {
    if (!bpf_program__autoload(p)) continue;
    bpf_link* l = bpf_program__attach(p);
    if (!l)
      throw std::runtime_error(explain_bpf_error(errno, std::string("attaching the thread-exit program ") +
                                                            bpf_program__name(p) +
                                                            " (needs tracefs for classic tracepoints)"));
    links_.push_back(l);
  }
}

Probes::~Probes() {
  detach();
  stage_.reset();
  for (int fd : ring_fds_) close(fd);
  if (skel_) detach_skeleton_together(skel_->skeleton);
  cptrace_bpf::destroy(skel_);
}

void Probes::start_following(uint32_t root) {
  tracefs_ = std::make_unique<TracefsUprobes>();
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.followed), &root, &one, BPF_ANY) != 0)
    throw std::runtime_error(explain_bpf_error(errno, "adding the recorded process to the followed set"));
  for (bpf_program* p : {skel_->progs.cp_follow_fork, skel_->progs.cp_follow_exit}) {
    bpf_link* l = bpf_program__attach(p);
    if (!l)
      throw std::runtime_error(explain_bpf_error(
          errno, std::string("attaching ") + bpf_program__name(p) +
                     " (following child processes needs tp_btf; --no-inherit records the process alone)"));
    follow_links_.push_back(l);
  }
}

// Sites in attach order: cp_logTS last, because a new process of a followed
// tree waits until its cp_logTS holds a breakpoint (lib/follow_wait.c), and
// must find the other sites attached by then. Every site is checked first
// (probe/probe_site.h): a symbol without the TSC stamp is refused, whether the
// site is required or optional, before any uprobe goes in.
void Probes::attach_target(const std::string& path, uint32_t tgid) {
  struct Site {
    bpf_program* prog;
    const char* symbol;
    bool required;
    uint64_t cookie = 0;
  };
  StagePrograms sp = stage_programs(skel_, kernel_features().preempt_kfunc);
  if (access(path.c_str(), R_OK) != 0) throw std::runtime_error("--lib " + path + ": " + strerror(errno));
  const std::string single = single_event_site(path);
  const Site sites[] = {
      {sp.batch_submit, "cp_batch_submit", true, CP_COOKIE_BATCH_TSC},
      // Where cp_logTS buffers events (lib/single_route.c): the flusher's
      // hand-over. Required where defined: without it those events would be lost.
      {sp.batch_submit, "cp_batch_submit_for", single == "cp_logTS_site", CP_COOKIE_BATCH_FOR},
      {sp.channel_announce, "cp_channel_announce", true},
      {sp.channel_closed, "cp_channel_closed", true},
      // libcptrace_jni.so (jni/) only: attached where the file defines them.
      {sp.jni_logTS, "Java_cp_Cloudprofiler_logTS", false},
      {sp.batch_submit, "cp_batch_submit_mono", false, CP_COOKIE_BATCH_MONO},
      {sp.logTS, single.c_str(), true},
  };
  std::optional<uint64_t> offsets[std::size(sites)];
  for (size_t i = 0; i < std::size(sites); ++i) {
    offsets[i] = probe_site_file_offset(path, sites[i].symbol);
    if (!offsets[i] && sites[i].required)
      throw std::runtime_error(
          fmt::format("attaching a uprobe to {}:{}: symbol not found (is this a "
                      "cptrace-instrumented ELF?)",
                      path, sites[i].symbol));
  }
  for (size_t i = 0; i < std::size(sites); ++i) {
    const Site& s = sites[i];
    if (!offsets[i]) continue;  // an optional site this file does not define
    bpf_link* l = attach_site(s.prog, path, *offsets[i], s.cookie, tgid);
    if (!l) {
      int err = errno;
      if (!s.required) continue;
      throw std::runtime_error(explain_uprobe_error(err, "attaching a uprobe to " + path + ":" + s.symbol));
    }
    links_.push_back(l);
    attached_.push_back(path + ":" + s.symbol);
  }
}

// With a process (-p, -- CMD): the kernel puts breakpoints in that process
// only (its memory, all its threads, also after the exec of a command held
// before it), so no other process mapping the file is patched; following, the
// uprobe is a tracefs event that later grows to the children (tracefs_uprobes.h).
// Without (--lib alone): every process mapping the file. `file_offset` is the
// site's nop (probe_site_file_offset()).
bpf_link* Probes::attach_site(bpf_program* prog, const std::string& path, uint64_t file_offset, uint64_t cookie,
                              uint32_t tgid) {
  if (!follow_) {
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = cookie);
    return bpf_program__attach_uprobe_opts(prog, tgid ? int(tgid) : -1, path.c_str(), file_offset, &uo);
  }
  int pfd = tracefs_->open(tracefs_->add(path, file_offset), pid_t(tgid));
  if (pfd < 0) return nullptr;
  LIBBPF_OPTS(bpf_perf_event_opts, po, .bpf_cookie = cookie);
  bpf_link* l = bpf_program__attach_perf_event_opts(prog, pfd, &po);
  if (!l) {
    int err = errno;
    close(pfd);
    errno = err;
  }
  return l;  // owns pfd: destroying the link closes it
}

void Probes::detach() {
  std::lock_guard lk(proc_mu_);
  detached_ = true;
  if (hello_link_) bpf_link__destroy(hello_link_);  // no process waits for us from here on
  hello_link_ = nullptr;
  // Each group together (link_release.h), the groups in this order.
  destroy_links_together(std::move(follow_links_));  // no new children first
  follow_links_.clear();
  std::vector<std::function<void()>> closes;
  for (auto& [tgid, fds] : proc_fds_)
    for (int fd : fds)
      if (fd >= 0) closes.push_back([fd] { close(fd); });
  release_together(std::move(closes));
  proc_fds_.clear();
  destroy_links_together(std::move(links_));
  links_.clear();
  if (tracefs_) tracefs_->remove_all();
}

Counters Probes::read_counters() const {
  int fd = bpf_map__fd(skel_->maps.counters);
  Counters c;
  c.seen = read_per_cpu_counter(fd, CP_CNT_SEEN);
  c.dropped = read_per_cpu_counter(fd, CP_CNT_DROPPED);
  c.filtered = read_per_cpu_counter(fd, CP_CNT_FILTERED);
  c.series_lost = read_per_cpu_counter(fd, CP_CNT_SERIES_LOST);
  return c;
}

int Probes::followed_map_fd() const { return follow_ ? bpf_map__fd(skel_->maps.followed) : -1; }

int Probes::proc_events_fd() const { return follow_ || all_ ? bpf_map__fd(skel_->maps.proc_events) : -1; }

// One more perf event per uprobe event, scoped to the new process: its
// breakpoints go in, and the programs already on the events run for it.
bool Probes::attach_process(uint32_t tgid) {
  std::lock_guard lk(proc_mu_);
  if (follow_links_.empty() || !tracefs_) return false;  // detached: stopping
  std::vector<int> fds;
  if (!open_missing(tgid, fds)) return false;  // gone already (ESRCH)
  proc_fds_[tgid] = std::move(fds);
  return true;
}

// Opens the events from fds.size() on for `tgid`; on failure closes those it
// opened and returns false.
bool Probes::open_missing(uint32_t tgid, std::vector<int>& fds) {
  size_t had = fds.size();
  for (size_t i = had; i < tracefs_->size(); i++) {
    int fd = tracefs_->open(i, pid_t(tgid));
    if (fd < 0) {
      for (size_t j = had; j < fds.size(); j++) close(fds[j]);
      fds.resize(had);
      return false;
    }
    fds.push_back(fd);
  }
  return true;
}

bool Probes::cover_process(uint32_t tgid) {
  std::lock_guard lk(proc_mu_);
  if (!follow_ || detached_ || !tracefs_) return !detached_;
  return open_missing(tgid, proc_fds_[tgid]);
}

bool Probes::add_target(const std::string& path, uint32_t tgid) {
  std::lock_guard lk(proc_mu_);
  if (detached_) return false;
  if (follow_) {
    std::vector<int>& fds = proc_fds_[tgid];
    if (!open_missing(tgid, fds)) return false;
    attach_target(path, tgid);
    fds.resize(tracefs_->size(), -1);  // the new events carry the programs, for this process
  } else {
    attach_target(path, 0);
  }
  added_.push_back(path);
  return true;
}

std::vector<std::string> Probes::added_targets() const {
  std::lock_guard lk(proc_mu_);
  return added_;
}

// Cheap: the uprobes stay registered; only the ended process leaves their list.
void Probes::detach_process(uint32_t tgid) {
  std::lock_guard lk(proc_mu_);
  auto it = proc_fds_.find(tgid);
  if (it == proc_fds_.end()) return;
  for (int fd : it->second)
    if (fd >= 0) close(fd);
  proc_fds_.erase(it);
}

uint64_t Probes::counter_total(uint32_t idx) const {
  uint64_t n = 0;
  for (auto x : read_per_cpu_counter(bpf_map__fd(skel_->maps.counters), idx)) n += x;
  return n;
}

int Probes::handlers_fd() const { return bpf_map__fd(skel_->maps.handlers); }
int Probes::last_slots_fd() const { return bpf_map__fd(skel_->maps.last_slots); }
int Probes::count_slots_fd() const { return bpf_map__fd(skel_->maps.count_slots); }
// .bss is mmapped by the skeleton: a plain store reaches the programs.
void Probes::enable_handlers() {
  if (!kernel_features().bpf_loop)
    throw std::runtime_error(
        fmt::format("channel handlers need the bpf_loop helper (Linux 5.17+); this kernel, "
                    "Linux {}, lacks it: record without --config / handler commands",
                    kernel_features().release));
  __atomic_store_n(&skel_->bss->handlers_in_use, 1, __ATOMIC_SEQ_CST);
}

}  // namespace cptrace
