#include "probe_attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "cptrace.skel.h"
#include "cptrace_records.h"

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
  for (const auto& t : opt.targets) attach_target(t);
}

Probes::~Probes() {
  detach();
  for (int fd : ring_fds_) close(fd);
  cptrace_bpf::destroy(skel_);
}

void Probes::create_rings(uint32_t ring_bytes) {
  int outer = bpf_map__fd(skel_->maps.rings);
  int ncpu = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cp_ring", 0, 0, ring_bytes, nullptr);
    if (fd < 0) throw std::runtime_error(explain_bpf_error(errno, "creating a ring buffer"));
    ring_fds_.push_back(fd);
    __u32 key = cpu;
    if (bpf_map_update_elem(outer, &key, &fd, BPF_ANY))
      throw std::runtime_error(explain_bpf_error(errno, "installing a ring buffer"));
  }
}

void Probes::attach_target(const std::string& path) {
  struct Site {
    bpf_program* prog;
    const char* symbol;
    bool required;
  };
  const Site sites[] = {
      {skel_->progs.cp_logTS, "cp_logTS", true},
      {skel_->progs.cp_batch_submit, "cp_batch_submit", true},
      {skel_->progs.cp_channel_announce, "cp_channel_announce", true},
      {skel_->progs.cp_channel_closed, "cp_channel_closed", true},
  };
  if (access(path.c_str(), R_OK) != 0)
    throw std::runtime_error("--lib " + path + ": " + strerror(errno));
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = s.symbol);
    // pid -1: every process mapping the file; the BPF side filters by tgid, which
    // also covers a process that has not exec'd yet (record -- CMD).
    bpf_link* l = bpf_program__attach_uprobe_opts(s.prog, -1, path.c_str(), 0, &uo);
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
  int ncpu = libbpf_num_possible_cpus();
  Counters c;
  c.seen.assign(ncpu, 0);
  c.dropped.assign(ncpu, 0);
  std::vector<__u64> vals(ncpu);
  int fd = bpf_map__fd(skel_->maps.counters);
  for (__u32 idx : {__u32(CP_CNT_SEEN), __u32(CP_CNT_DROPPED)}) {
    if (bpf_map_lookup_elem(fd, &idx, vals.data())) continue;
    auto& dst = idx == CP_CNT_SEEN ? c.seen : c.dropped;
    for (int i = 0; i < ncpu; ++i) dst[i] = vals[i];
  }
  return c;
}

}  // namespace cptrace
