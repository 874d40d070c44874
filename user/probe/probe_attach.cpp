#include "probe/probe_attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "cptrace.skel.h"
#include "cptrace_records.h"
#include "probe/per_cpu_rings.h"
#include "probe/proc_registry.h"

namespace cptrace {

std::string explain_bpf_error(int err, const std::string& what) {
  err = err < 0 ? -err : err;
  std::string s = what + ": " + strerror(err);
  if (err == EPERM || err == EACCES)
    s += " (recording needs root, or CAP_BPF + CAP_PERFMON; see `cptrace check`)";
  return s;
}

Probes::Probes(const ProbeOptions& opt) {
  if (opt.targets.empty() && !opt.allow_no_targets) throw std::runtime_error("no target library or executable to attach to");
  skel_ = cptrace_bpf::open();
  if (!skel_) throw std::runtime_error(explain_bpf_error(errno, "opening the BPF object"));
  skel_->rodata->filter_tgid = opt.filter_tgid;
  skel_->rodata->wakeup_bytes = opt.wakeup_bytes;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error(explain_bpf_error(ncpu, "counting CPUs"));
  bpf_map__set_max_entries(skel_->maps.rings, ncpu);
  // The inner-map template keeps its compiled size: the kernel does not compare
  // ring sizes when we install our own rings (create_rings) into the array.
  if (int err = cptrace_bpf::load(skel_))
    throw std::runtime_error(explain_bpf_error(err, "loading the BPF programs"));
  create_rings(opt.ring_bytes);
  if (opt.before_attach) opt.before_attach(*this);
  for (const auto& t : opt.targets) attach_target(t, opt.filter_tgid);
}

Probes::~Probes() {
  detach();
  for (int fd : ring_fds_) close(fd);
  cptrace_bpf::destroy(skel_);
}

void Probes::create_rings(uint32_t ring_bytes) {
  ring_fds_ = install_per_cpu_rings(bpf_map__fd(skel_->maps.rings), ring_bytes, "cp_ring", "a ring buffer");
}

// Checked before attaching an optional site, so that libbpf does not print a
// "symbol not found" warning for every file without it.
static bool defines_symbol(const std::string& path, const char* symbol) {
  try {
    return elf_symbol_file_offset(path, symbol).has_value();
  } catch (const std::exception&) {
    return false;  // unreadable or not ELF: the required sites report it
  }
}

void Probes::attach_target(const std::string& path, uint32_t tgid) {
  struct Site {
    bpf_program* prog;
    const char* symbol;
    bool required;
    uint64_t cookie = 0;
  };
  const Site sites[] = {
      {skel_->progs.cp_logTS, "cp_logTS", true},
      {skel_->progs.cp_batch_submit, "cp_batch_submit", true, CP_COOKIE_BATCH_TSC},
      {skel_->progs.cp_channel_announce, "cp_channel_announce", true},
      {skel_->progs.cp_channel_closed, "cp_channel_closed", true},
      // libcptrace_jni.so (jni/) only: attached where the file defines them.
      {skel_->progs.cp_jni_logTS, "Java_cp_Cloudprofiler_logTS", false},
      {skel_->progs.cp_batch_submit, "cp_batch_submit_mono", false, CP_COOKIE_BATCH_MONO},
  };
  if (access(path.c_str(), R_OK) != 0)
    throw std::runtime_error("--lib " + path + ": " + strerror(errno));
  for (const auto& s : sites) {
    if (!s.required && !defines_symbol(path, s.symbol)) continue;
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = s.cookie, .func_name = s.symbol);
    // With a process (-p, -- CMD): the kernel puts breakpoints in that process
    // only (its memory, all its threads, also after the exec of a command held
    // before it), so no other process mapping the file is patched. Without
    // (--lib alone): every process mapping the file. The BPF side filters by
    // tgid in both cases.
    int pid = tgid ? int(tgid) : -1;
    bpf_link* l = bpf_program__attach_uprobe_opts(s.prog, pid, path.c_str(), 0, &uo);
    if (!l) {
      int err = errno;
      if (!s.required) continue;
      throw std::runtime_error(explain_bpf_error(
          err, "attaching a uprobe to " + path + ":" + s.symbol +
                   (err == ENOENT ? " (symbol not found: is this a cptrace-instrumented ELF?)" : "")));
    }
    links_.push_back(l);
    attached_.push_back(path + ":" + s.symbol);
  }
}

void Probes::detach() {
  for (auto* l : links_) bpf_link__destroy(l);
  links_.clear();
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

int Probes::handlers_fd() const { return bpf_map__fd(skel_->maps.handlers); }
int Probes::last_slots_fd() const { return bpf_map__fd(skel_->maps.last_slots); }
int Probes::count_slots_fd() const { return bpf_map__fd(skel_->maps.count_slots); }
// .bss is mmapped by the skeleton: a plain store reaches the programs.
void Probes::enable_handlers() { __atomic_store_n(&skel_->bss->handlers_in_use, 1, __ATOMIC_SEQ_CST); }

}  // namespace cptrace
