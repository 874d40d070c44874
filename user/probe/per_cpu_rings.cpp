#include "probe/per_cpu_rings.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "probe/probe_attach.h"

namespace cptrace {

namespace {

std::vector<int> make_rings(uint32_t ring_bytes, const char* name, const char* what) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error(explain_bpf_error(ncpu, "counting CPUs"));
  std::vector<int> fds;
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, name, 0, 0, ring_bytes, nullptr);
    if (fd < 0) {
      int err = errno;
      for (int f : fds) close(f);
      throw std::runtime_error(explain_bpf_error(err, std::string("creating ") + what));
    }
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace

PendingRings::PendingRings(uint32_t ring_bytes, const char* name, const char* what)
    : made_(std::async(std::launch::async, make_rings, ring_bytes, name, what)), what_(what) {}

PendingRings::~PendingRings() {
  if (!made_.valid()) return;
  try {
    for (int fd : made_.get()) close(fd);
  } catch (const std::exception&) {  // the caller failed first: its error is the one to tell
  }
}

std::vector<int> PendingRings::install(int outer_map_fd) {
  std::vector<int> fds = made_.get();
  for (size_t cpu = 0; cpu < fds.size(); ++cpu) {
    __u32 key = cpu;
    if (bpf_map_update_elem(outer_map_fd, &key, &fds[cpu], BPF_ANY)) {
      int err = errno;
      for (int fd : fds) close(fd);
      throw std::runtime_error(explain_bpf_error(err, std::string("installing ") + what_));
    }
  }
  return fds;
}

std::vector<uint64_t> read_per_cpu_counter(int counters_map_fd, uint32_t idx) {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> out(ncpu > 0 ? ncpu : 0, 0);
  std::vector<__u64> vals(out.size());
  if (!out.empty() && bpf_map_lookup_elem(counters_map_fd, &idx, vals.data()) == 0)
    out.assign(vals.begin(), vals.end());
  return out;
}

}  // namespace cptrace
