#include "probe/attach_targets.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "probe/proc_registry.h"
#include "probe/shared_deps.h"

namespace fs = std::filesystem;

namespace cptrace {

bool elf_has_probe_site(const std::string& path) {
  try {
    return elf_symbol_file_offset(path, "cp_logTS").has_value();
  } catch (const std::exception&) {
    return false;  // not an ELF file, unreadable, ...: not a target
  }
}

std::vector<std::string> targets_of_process(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (std::string line; std::getline(maps, line);) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.size() > 10 && path.ends_with(" (deleted)")) continue;
    if (!seen.insert(path).second) continue;
    // Through /proc/PID/root so a process in another mount namespace works too.
    std::string via_root = "/proc/" + std::to_string(pid) + "/root" + path;
    if (elf_has_probe_site(via_root)) out.push_back(fs::exists(path) ? path : via_root);
  }
  return out;
}

std::string resolve_in_path(const std::string& cmd) {
  if (cmd.find('/') != std::string::npos) return fs::exists(cmd) ? fs::absolute(cmd).string() : "";
  const char* p = getenv("PATH");
  std::istringstream dirs(p ? p : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    fs::path c = fs::path(d.empty() ? "." : d) / cmd;
    if (access(c.c_str(), X_OK) == 0) return fs::absolute(c).string();
  }
  return "";
}

std::string bundled_library() {
  std::error_code ec;
  fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return "";
  // build/: beside the binary; `make install`: PREFIX/bin/cptrace, PREFIX/lib/libcptrace.so.
  for (const fs::path& p : {bin / "libcptrace.so", bin.parent_path() / "lib" / "libcptrace.so"})
    if (elf_has_probe_site(p.string())) return fs::canonical(p, ec).string();
  return "";
}

std::vector<std::string> targets_of_command(const std::string& cmd) {
  std::vector<std::string> out;
  std::string exe = resolve_in_path(cmd);
  if (exe.empty()) return out;
  if (elf_has_probe_site(exe)) out.push_back(exe);
  for (const auto& lib : shared_library_deps(exe))
    if (elf_has_probe_site(lib)) out.push_back(fs::canonical(lib).string());
  // The command may dlopen it, or start children that load it.
  std::string own = bundled_library();
  if (!own.empty()) out.push_back(own);
  return out;
}

}  // namespace cptrace
