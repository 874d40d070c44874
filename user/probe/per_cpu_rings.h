// The user side of bpf/ring_common.h: the ring buffers a BPF program writes into
// (one per CPU, installed in its ARRAY_OF_MAPS before attach) and its per-CPU
// counters. Shared by the user-event probes and the network capture.
#pragma once
#include <cstdint>
#include <vector>

namespace cptrace {

// Creates one ring of `ring_bytes` per possible CPU and installs it at index
// cpu of the outer map. Returns the ring fds (the caller closes them); throws
// naming `what` and the kernel's reason. `name` is the maps' name in bpftool.
std::vector<int> install_per_cpu_rings(int outer_map_fd, uint32_t ring_bytes, const char* name, const char* what);

// Counter `idx` of a per-CPU counter array, one value per possible CPU (zeros
// if the map cannot be read: the counters are then reported as nothing seen).
std::vector<uint64_t> read_per_cpu_counter(int counters_map_fd, uint32_t idx);

}  // namespace cptrace
