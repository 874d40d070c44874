// The user side of bpf/ring_common.h: the ring buffers a BPF program writes into
// (one per CPU, installed in its ARRAY_OF_MAPS before attach) and its per-CPU
// counters. Shared by the user-event probes and the network capture.
#pragma once
#include <cstdint>
#include <future>
#include <vector>

namespace cptrace {

// One ring of `ring_bytes` per possible CPU, made on a thread of its own from
// construction on: the kernel allocates and zeroes a ring's pages when it is
// created (tens of ms per CPU at the default size), time that the verifier's
// work on the programs can hide. `name` is the maps' name in bpftool.
class PendingRings {
 public:
  PendingRings(uint32_t ring_bytes, const char* name, const char* what);
  ~PendingRings();  // closes the rings install() did not hand over
  PendingRings(const PendingRings&) = delete;
  PendingRings& operator=(const PendingRings&) = delete;

  // Waits for the rings and installs each at index cpu of the outer map.
  // Returns their fds (the caller closes them); throws naming `what` and the
  // kernel's reason.
  std::vector<int> install(int outer_map_fd);

 private:
  std::future<std::vector<int>> made_;
  const char* what_;
};

// Counter `idx` of a per-CPU counter array, one value per possible CPU (zeros
// if the map cannot be read: the counters are then reported as nothing seen).
std::vector<uint64_t> read_per_cpu_counter(int counters_map_fd, uint32_t idx);

}  // namespace cptrace
