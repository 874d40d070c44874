#include "probe/per_cpu_rings.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "probe/probe_attach.h"

namespace cptrace {

std::vector<int> install_per_cpu_rings(int outer_map_fd, uint32_t ring_bytes, const char* name, const char* what) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error(explain_bpf_error(ncpu, "counting CPUs"));
  std::vector<int> fds;
  auto fail = [&](const char* step) {
    int err = errno;
    for (int fd : fds) close(fd);
    throw std::runtime_error(explain_bpf_error(err, std::string(step) + " " + what));
  };
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, name, 0, 0, ring_bytes, nullptr);
    if (fd < 0) fail("creating");
    fds.push_back(fd);
    __u32 key = cpu;
    if (bpf_map_update_elem(outer_map_fd, &key, &fd, BPF_ANY)) fail("installing");
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
