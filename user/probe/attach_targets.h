// Which ELF files to put the uprobes in, when the user did not say (--lib).
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

#include "probe/maps_line.h"

namespace cptrace {

// True if the ELF file defines the probe stub symbol cp_logTS.
bool elf_has_probe_site(const std::string& path);
// Every mapped file of a running process that holds the probe site (late attach).
std::vector<std::string> targets_of_process(pid_t pid);
// For `record -- CMD`: the command's executable if it holds the probe site
// (statically linked), the libraries holding it among the command's dynamic
// dependencies, and bundled_library() (so a command that dlopens it, or links
// none, still records: nothing, in the second case). Empty when CMD is not found.
std::vector<std::string> targets_of_command(const std::string& cmd);
// The libcptrace.so that came with this cptrace binary: beside it (build/), else
// in ../lib (`make install`'s PREFIX/lib); "" if neither holds the probe site.
std::string bundled_library();
// True when both paths open the same file (device and inode).
bool same_file(const std::string& a, const std::string& b);
// A target's path as written into the trace: symlinks resolved, except below
// /proc, kept as given: a /proc/PID/root/... path resolves in that process's
// mount namespace only as it is (resolving the magic link yields a path of
// ours, which names another file or none).
std::string shown_path(const std::string& path);
// A path that opens the file of `pid`'s maps line `m`: the process's own name
// for it when that is the same file here, else through /proc/PID/root, else
// /proc/PID/map_files/RANGE.
std::string path_to_mapped_file(pid_t pid, const MapsLine& m);
// The command name resolved through PATH ("" if not found).
std::string resolve_in_path(const std::string& cmd);

}  // namespace cptrace
