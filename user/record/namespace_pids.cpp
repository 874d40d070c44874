#include "record/namespace_pids.h"
#include "trace/json_text.h"
#include "os/time_units.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

namespace cptrace {

namespace {

// The last pid of an "NStgid:" line: the innermost namespace's.
std::optional<uint32_t> innermost_tgid(uint32_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("NStgid:")) continue;
    std::istringstream in(line.substr(7));
    std::optional<uint32_t> last;
    for (uint32_t v; in >> v;) last = v;
    return last;
  }
  return std::nullopt;
}

uint64_t pid_namespace_of(const std::string& proc_dir) {
  struct stat st {};
  return stat((proc_dir + "/ns/pid").c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// The CLOCK_MONOTONIC offset of the process's time namespace. The file shows
// the namespace of its future children (kernel/time/namespace.c,
// proc_timens_show_offsets): its own only when both links are the same
// namespace, which they are for every process that did not itself unshare one.
// No file (a kernel without time namespaces): no offset.
void read_time_offset(const std::string& dir, PidEntry& e) {
  std::ifstream in(dir + "/timens_offsets");
  if (!in) return;
  if (inode_of(dir + "/ns/time") != inode_of(dir + "/ns/time_for_children")) {
    e.mono_offset_unknown = true;
    return;
  }
  for (std::string clock; in >> clock;) {
    int64_t s = 0, ns = 0;
    if (!(in >> s >> ns)) break;
    if (clock == "monotonic") e.mono_offset_ns = s * kNsPerSecond + ns;
  }
}

// The cgroup v2 line "0::PATH" (a v1-only host has none: left empty).
void read_cgroup(const std::string& dir, PidEntry& e) {
  std::ifstream in(dir + "/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("0::")) {
      e.cgroup = line.substr(3);
      e.container_id = container_id_of_cgroup(e.cgroup);
    }
}

}  // namespace

std::optional<PidEntry> read_namespace_pid(uint32_t pid) {
  std::string dir = "/proc/" + std::to_string(pid);
  uint64_t ns = pid_namespace_of(dir);
  std::optional<uint32_t> nspid = innermost_tgid(pid);
  if (!ns || !nspid) return std::nullopt;
  PidEntry e{pid, *nspid, ns};
  read_time_offset(dir, e);
  read_cgroup(dir, e);
  return e;
}

uint64_t own_pid_namespace() { return pid_namespace_of("/proc/self"); }

NamespacePids::NamespacePids() { all_.recorder_pidns = own_pid_namespace(); }

void NamespacePids::add(uint32_t pid) {
  {
    std::lock_guard lk(mu_);
    if (!pid || met_.count(pid)) return;
  }
  add(pid, read_namespace_pid(pid));  // outside the lock: /proc reads
}

void NamespacePids::add(uint32_t pid, const std::optional<PidEntry>& e) {
  std::lock_guard lk(mu_);
  if (!pid || !met_.insert(pid).second || !e) return;
  all_.by_pid[pid] = *e;
  pending_.push_back(*e);
}

bool NamespacePids::take_pending(EncodedFrame& f) {
  std::lock_guard lk(mu_);
  if (pending_.empty()) return false;
  f = encode_json(FrameType::Processes, json_text(pid_frame_json(all_.recorder_pidns, pending_)),
                  uint32_t(pending_.size()));
  pending_.clear();
  return true;
}

nlohmann::json NamespacePids::all_json() {
  std::lock_guard lk(mu_);
  return all_.to_json();
}

}  // namespace cptrace
