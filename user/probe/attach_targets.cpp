#include "probe/attach_targets.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "probe/maps_line.h"
#include "probe/proc_registry.h"
#include "probe/shared_deps.h"

namespace fs = std::filesystem;

namespace cptrace {

namespace {
// Debian's multiarch library directory of this build's architecture (x86-64 only).
constexpr const char* kMultiarch = "x86_64-linux-gnu";
}  // namespace

bool elf_has_probe_site(const std::string& path) {
  try {
    return elf_symbol_file_offset(path, "cp_logTS").has_value();
  } catch (const std::exception&) {
    return false;  // not an ELF file, unreadable, ...: not a target
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool is_through_proc(const std::string& path) { return path.starts_with("/proc/"); }

std::string shown_path(const std::string& path) {
  if (is_through_proc(path)) return path;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

// The path to give the kernel for a file mapped by `pid`: the path in the
// process's maps is its own. In a container (another mount namespace) it names a
// file only there, or another file of ours, or (a chroot) a path of a mount we
// cannot reach. /proc/PID/map_files/RANGE always opens the mapped file itself;
// the host's path, else the one through /proc/PID/root, is preferred when it
// opens the same file (nicer to read in meta.json, and stable after an unmap).
std::string path_to_mapped_file(pid_t pid, const MapsLine& m) {
  std::string proc = "/proc/" + std::to_string(pid);
  std::string mapped = proc + "/map_files/" + m.map_files_name();
  for (const std::string& p : {m.path, proc + "/root" + m.path})
    if (same_file(p, mapped)) return p;
  return mapped;
}

std::vector<std::string> targets_of_process(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (std::string line; std::getline(maps, line);) {
    auto m = parse_maps_line(line);
    if (!m || !m->live_file() || !seen.insert(m->path).second) continue;
    std::string target = path_to_mapped_file(pid, *m);
    if (elf_has_probe_site(target)) out.push_back(target);
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
  // build/: beside the binary; `make install`: PREFIX/bin/cptrace, PREFIX/lib/libcptrace.so;
  // the Debian package: /usr/bin/cptrace, /usr/lib/x86_64-linux-gnu/libcptrace.so.
  fs::path lib = bin.parent_path() / "lib";
  for (const fs::path& p : {bin / "libcptrace.so", lib / "libcptrace.so", lib / kMultiarch / "libcptrace.so"})
    if (elf_has_probe_site(p.string())) return shown_path(p.string());
  return "";
}

std::vector<std::string> targets_of_command(const std::string& cmd) {
  std::vector<std::string> out;
  std::string exe = resolve_in_path(cmd);
  if (exe.empty()) return out;
  if (elf_has_probe_site(exe)) out.push_back(exe);
  for (const auto& lib : shared_library_deps(exe))
    if (elf_has_probe_site(lib)) out.push_back(shown_path(lib));
  // The command may dlopen it, or start children that load it.
  std::string own = bundled_library();
  if (!own.empty()) out.push_back(own);
  return out;
}

}  // namespace cptrace
