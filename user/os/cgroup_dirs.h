// cgroup v2 directories on this machine: the id the kernel gives a cgroup
// (bpf_get_current_cgroup_id(), the inode of its directory), and the directory
// a container runtime made for a container. For `record --net --cgroup` and
// `netlat --cgroup/--container`.
#pragma once
#include <cstdint>
#include <string>

namespace cptrace {

// Where the cgroup v2 hierarchy is mounted (/proc/self/mountinfo; "" when it is not).
std::string cgroup2_mount();

// The id of the cgroup v2 directory PATH (e.g. /sys/fs/cgroup/system.slice/x.service).
// Throws naming `flag` and PATH when it is no such directory.
uint64_t cgroup_dir_id(const std::string& path, const std::string& flag);

// --cgroup: a number is an id as recorded (`dump` shows it; stat -c %i gives it
// on the node); anything else a directory of this machine (cgroup_dir_id).
uint64_t cgroup_of(const std::string& text, const std::string& flag);

// The cgroup directory of the container whose id starts with `id` (at least 12
// hex digits), as Docker, containerd (CRI), CRI-O and Podman name it under
// systemd (docker-ID.scope, cri-containerd-ID.scope, crio-ID.scope,
// libpod-ID.scope) or in their cgroupfs layouts (a directory named by the
// 64-digit id): its id. Throws when none or several match.
uint64_t container_cgroup(const std::string& id, const std::string& flag);

}  // namespace cptrace
