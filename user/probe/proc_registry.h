// Reading libcptrace's channel registry out of a running process, and finding
// symbol file offsets for uprobes.
//
// A recorder attached after a process opened its channels never sees their
// announcements; the names are in the process's `cptrace_registry` global
// (include/cptrace_registry.h) instead. read_process_registry() finds that
// global in every ELF object mapped into the process (libcptrace.so, or an
// executable with libcptrace.a linked in, PIE or not) and reads it with
// process_vm_readv. Needs root or CAP_SYS_PTRACE over the target.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cptrace {

struct ChannelEntry {
  uint64_t id = 0;  // cp_channel_id(name) as computed by the process
  std::string name;  // as registered (truncated to CP_CHANNEL_NAME_MAX-1 bytes)
  bool closed = false;  // cp_close_channel() was called and not reopened since
  bool operator==(const ChannelEntry&) const = default;
};

// What went wrong reading another process (no such process, no permission,
// registry of an unknown layout). what() names the pid and the cause.
class ProcRegistryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// All channels registered in process `pid`, in registration order, each id
// once (a process may carry several copies of the library, e.g. a static one
// in the executable and libcptrace.so; their registries are merged). Empty if
// the process does not use libcptrace or has opened no channel yet.
// `refused`, if given, is increased by the names the process's registries did
// not keep (full at CP_REGISTRY_MAX_NAMES, or out of memory): their events carry
// ids a recorder attached later cannot name. Throws ProcRegistryError.
std::vector<ChannelEntry> read_process_registry(pid_t pid, uint64_t* refused = nullptr);

// Reads len bytes of the target's memory at addr into dst: false where nothing
// is mapped (the object went away); throws ProcRegistryError when the process
// is gone or may not be read.
using RemoteRead = std::function<bool(uint64_t addr, void* dst, size_t len)>;
// The channels of the registry at `addr` of one mapped object, read through
// `read` (what read_process_registry does for each object that defines the
// symbol; sym_size: the symbol's size, 0 if unknown). The bytes are the traced
// process's to choose: a bad header or chunk throws ProcRegistryError starting
// with `where`, and no count makes it allocate or loop without bound.
std::vector<ChannelEntry> read_registry_at(const RemoteRead& read, const std::string& where, uint64_t addr,
                                           uint64_t sym_size, uint64_t* refused = nullptr);

// The file offset of the defined symbol `symbol` in the ELF file `elf_path`
// (looked up in .symtab, then .dynsym), i.e. what a uprobe on it is attached
// at. nullopt if the file does not define the symbol or the symbol has no file
// bytes (e.g. .bss). Throws ProcRegistryError if the file cannot be opened or
// is not ELF.
std::optional<uint64_t> elf_symbol_file_offset(const std::string& elf_path, const std::string& symbol);

}  // namespace cptrace
