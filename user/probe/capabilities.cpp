#include "probe/capabilities.h"

#include <fstream>
#include <stdexcept>

namespace cptrace {

const char* cap_name(Cap c) {
  switch (c) {
    case Cap::DacReadSearch:
      return "CAP_DAC_READ_SEARCH";
    case Cap::NetAdmin:
      return "CAP_NET_ADMIN";
    case Cap::SysPtrace:
      return "CAP_SYS_PTRACE";
    case Cap::SysAdmin:
      return "CAP_SYS_ADMIN";
    case Cap::Perfmon:
      return "CAP_PERFMON";
    case Cap::Bpf:
      return "CAP_BPF";
  }
  return "CAP_?";
}

// Not euid 0: root in a container, or under `setpriv`, holds only what it was given.
bool has_capability(Cap c) {
  std::ifstream st("/proc/self/status");
  for (std::string line; std::getline(st, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long eff = std::stoull(line.substr(7), nullptr, 16);
    return (eff >> int(c)) & 1;
  }
  return false;
}

bool can_load_bpf() {
  return has_capability(Cap::SysAdmin) || (has_capability(Cap::Bpf) && has_capability(Cap::Perfmon));
}

void require_node_wide_capabilities() {
  std::string missing;
  if (!has_capability(Cap::SysPtrace))
    missing +=
        "; CAP_SYS_PTRACE: it reads the memory map of each process that says hello (/proc/PID/maps), opens its "
        "library as the process sees it (/proc/PID/root, /proc/PID/map_files) and answers it by writing into it "
        "(process_vm_writev), which the kernel allows, for a process of another user or one holding a capability "
        "the recorder lacks, only with CAP_SYS_PTRACE";
  if (!has_capability(Cap::DacReadSearch))
    missing +=
        "; CAP_DAC_READ_SEARCH: it reads each process's library, which may lie in a directory or file only its "
        "owner may read (root without this capability may not)";
  if (missing.empty()) return;
  throw std::runtime_error("record --all needs" + missing.substr(1) + " (docs/deploy.md)");
}

// Since Linux 6.16 (commit "perf: Revert to requiring CAP_SYS_ADMIN for uprobes",
// also in the stable kernels of that summer), CAP_PERFMON no longer creates uprobes.
std::string uprobe_permission_hint() {
  if (has_capability(Cap::SysAdmin))
    return " (CAP_SYS_ADMIN held: the kernel refused it all the same; lockdown or a security module?)";
  return " (creating a uprobe needs CAP_SYS_ADMIN, which this process lacks: CAP_PERFMON no longer suffices since "
         "Linux 6.16 and the stable kernels that took the same fix; docs/deploy.md)";
}

}  // namespace cptrace
