// The pid of each recorded process in its own pid namespace (a container's),
// beside the host pid that every event carries.
//
// The BPF programs stamp events with the host tgid/tid (bpf_get_current_pid_tgid),
// which is what the kernel, `ps` on the host and perf show. A process in a
// container knows itself by another pid, the one its logs and its own /proc
// show. Rather than widen every event by a second pid, the recorder writes one
// entry per recorded process into Processes frames (a later entry of a pid
// wins) and into meta.json:
//
//   {"pidns": INODE of the recorder's pid namespace,
//    "processes": [{"pid": HOST_PID, "nspid": PID_IN_ITS_NAMESPACE, "pidns": INODE,
//                   "cgroup": PATH, "container_id": ID}, ...]}
//
// with "mono_offset_ns" (a time namespace's CLOCK_MONOTONIC offset) and
// "mono_offset_unknown" in an entry when they apply; "cgroup" and
// "container_id" when known (a reader before them ignores them).
//
// A reader older than this frame type skips it (an unknown type with a good
// CRC); a trace without it simply has no namespace pids.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct PidEntry {
  uint32_t pid = 0;  // host pid (tgid), as in the events
  uint32_t nspid = 0;  // the same process's pid in its own pid namespace
  uint64_t pidns = 0;  // inode of that namespace (/proc/PID/ns/pid)
  // Its time namespace's CLOCK_MONOTONIC offset (what its clock reads minus the
  // host's): a System.nanoTime() it hands over is that much off the kernel's
  // stamps. `mono_offset_unknown`: its own namespace's offset could not be read
  // (it unshared a time namespace without forking: /proc/PID/timens_offsets
  // shows its children's).
  int64_t mono_offset_ns = 0;
  bool mono_offset_unknown = false;
  // Its cgroup (v2 path, /proc/PID/cgroup) and the container id found in it
  // (container_id_of_cgroup()); "" when unknown or none.
  std::string cgroup;
  std::string container_id;
  bool operator==(const PidEntry&) const = default;
};

// The container id a runtime put into a cgroup path: the last component's run
// of 64 hex digits (docker-ID.scope, cri-containerd-ID.scope, crio-ID.scope,
// /docker/ID, /kubepods/.../ID); "" if none.
std::string container_id_of_cgroup(const std::string& cgroup);

struct PidTable {
  uint64_t recorder_pidns = 0;  // the namespace the host pids belong to
  std::map<uint32_t, PidEntry> by_pid;

  // The pid in its own namespace when that is not the recorder's namespace
  // (a process in a container); nullopt for a host process or an unknown pid.
  std::optional<uint32_t> container_pid(uint32_t pid) const;
  // " nspid=N" after a text "pid=..." field for a process in a container, else "".
  std::string text_suffix(uint32_t pid) const;
  // The CSV field of an `nspid` column: N for a process in a container, else empty.
  std::string csv_field(uint32_t pid) const;
  // Whether any process lives in another pid namespace than the recorder.
  bool any_container() const;
  // Adds a frame's entries; throws std::runtime_error when malformed.
  void merge(const nlohmann::json& frame);
  nlohmann::json to_json() const;
};

// One Processes frame's JSON for these entries.
nlohmann::json pid_frame_json(uint64_t recorder_pidns, const std::vector<PidEntry>& entries);

}  // namespace cptrace
