// The capabilities a recording needs, and which of them this process lacks:
// so that a recorder run with a reduced set (a container, a DaemonSet) says
// which capability is missing for which step, instead of a bare EPERM or, for
// the processes it cannot reach, an empty trace (docs/deploy.md).
#pragma once
#include <string>

namespace cptrace {

// Capability numbers of linux/capability.h that the recorder relies on.
enum class Cap : int { DacReadSearch = 2, NetAdmin = 12, SysPtrace = 19, SysAdmin = 21, Perfmon = 38, Bpf = 39 };

// "CAP_SYS_PTRACE" and so on.
const char* cap_name(Cap c);

// Whether this process holds `c` in its effective set (CapEff of /proc/self/status).
bool has_capability(Cap c);

// Loading BPF programs and opening their rings: CAP_SYS_ADMIN, or CAP_BPF and CAP_PERFMON.
bool can_load_bpf();

// record --all reads every process's memory map, opens its library and
// answers its hello by writing into it: a process of another user, or one
// holding a capability the recorder lacks, is reachable only with
// CAP_SYS_PTRACE, and a library in a private directory only with
// CAP_DAC_READ_SEARCH. Throws, naming each missing capability and what needs it.
void require_node_wide_capabilities();

// The words appended to a refused uprobe (EPERM, EACCES): which capability it needs.
std::string uprobe_permission_hint();

}  // namespace cptrace
