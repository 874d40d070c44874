// Which ELF files to put the uprobes in, when the user did not say (--lib).
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace cptrace {

// True if the ELF file defines the probe stub symbol cp_logTS.
bool elf_has_probe_site(const std::string& path);
// Every mapped file of a running process that holds the probe site (late attach).
std::vector<std::string> targets_of_process(pid_t pid);
// For `record -- CMD`: the command's executable if it holds the probe site
// (statically linked), and the libcptrace.so installed beside this cptrace binary
// (build/ or PREFIX/lib) or found through the command's dynamic dependencies.
std::vector<std::string> targets_of_command(const std::string& cmd);
// The command name resolved through PATH ("" if not found).
std::string resolve_in_path(const std::string& cmd);

}  // namespace cptrace
