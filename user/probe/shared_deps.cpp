// See shared_deps.h. Follows glibc's search order (elf/dl-load.c, _dl_map_object).
#include "probe/shared_deps.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

extern char** environ;

namespace fs = std::filesystem;

namespace cptrace {
namespace {

// What the loader reads of one ELF file.
struct DynInfo {
  int elf_class = 0;  // ELFCLASS32 / ELFCLASS64
  int machine = 0;  // e_machine
  std::vector<std::string> needed;
  std::string rpath, runpath;  // colon-separated, unexpanded
  std::string interp;  // PT_INTERP: the loader itself, already in memory
};

// The dynamic section of `path`; nullopt if it cannot be opened or is not ELF.
std::optional<DynInfo> read_dyn_info(const std::string& path) {
  static const bool elf_ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!elf_ok) return std::nullopt;
  // O_NONBLOCK: a FIFO named like a library must not block us.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::optional<DynInfo> out;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &eh)) {
    DynInfo d;
    d.elf_class = gelf_getclass(elf);
    d.machine = eh.e_machine;
    size_t nph = 0;
    if (elf_getphdrnum(elf, &nph) == 0)
      for (size_t i = 0; i < nph; ++i) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_INTERP) continue;
        size_t len = 0;
        const char* raw = elf_rawfile(elf, &len);
        if (raw && ph.p_offset < len && ph.p_filesz <= len - ph.p_offset)
          d.interp.assign(raw + ph.p_offset, strnlen(raw + ph.p_offset, ph.p_filesz));
      }
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
      for (size_t i = 0; data && i < n; ++i) {
        GElf_Dyn dyn;
        if (!gelf_getdyn(data, static_cast<int>(i), &dyn) || dyn.d_tag == DT_NULL) break;
        if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH) continue;
        const char* s = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
        if (!s) continue;
        if (dyn.d_tag == DT_NEEDED)
          d.needed.emplace_back(s);
        else if (dyn.d_tag == DT_RPATH)
          d.rpath = s;
        else
          d.runpath = s;
      }
    }
    out = std::move(d);
  }
  if (elf) elf_end(elf);
  ::close(fd);
  return out;
}

// Directory names the loader uses for $LIB and the triplet directories.
std::string multiarch(int machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86_64-linux-gnu";
    case EM_AARCH64:
      return "aarch64-linux-gnu";
    case EM_386:
      return "i386-linux-gnu";
    default:
      return "";
  }
}
std::string platform(int machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "i686";
    default:
      return "";
  }
}

// Replaces every $NAME and ${NAME} of `dir`.
std::string expand_dst(std::string dir, const std::string& origin, int machine) {
  std::string triplet = multiarch(machine);
  const std::pair<std::string, std::string> subst[] = {
      {"ORIGIN", origin}, {"LIB", triplet.empty() ? "lib" : "lib/" + triplet}, {"PLATFORM", platform(machine)}};
  for (const auto& [name, value] : subst)
    for (const std::string& tok : {"${" + name + "}", "$" + name})
      for (size_t p; (p = dir.find(tok)) != std::string::npos;) dir.replace(p, tok.size(), value);
  return dir;
}

std::vector<std::string> split_path(const std::string& list, const std::string& origin, int machine) {
  std::vector<std::string> out;
  std::istringstream in(list);
  // An empty element means the current directory, for the loader as for PATH.
  for (std::string d; std::getline(in, d, ':');) out.push_back(d.empty() ? "." : expand_dst(d, origin, machine));
  return out;
}

// Output of `ldconfig -p`, run with an argument vector (no shell) and a time
// limit; "" if it cannot be run.
std::string run_ldconfig_p() {
  const char* candidates[] = {"/sbin/ldconfig", "/usr/sbin/ldconfig"};
  const char* ldconfig = nullptr;
  for (const char* c : candidates)
    if (access(c, X_OK) == 0) {
      ldconfig = c;
      break;
    }
  if (!ldconfig) return "";
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>(ldconfig), const_cast<char*>("-p"), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, ldconfig, &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  std::string out;
  if (rc == 0) {
    // Reading the cache takes milliseconds; never let a stuck child hold up record.
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char buf[8192];
    for (;;) {
      int left =
          int(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count());
      pollfd p{fds[0], POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) {
        kill(pid, SIGKILL);
        out.clear();
        break;
      }
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    waitpid(pid, nullptr, 0);
  }
  ::close(fds[0]);
  return out;
}

// /etc/ld.so.cache: library name -> paths, in the cache's order.
const std::multimap<std::string, std::string>& ld_cache() {
  static const std::multimap<std::string, std::string> cache = [] {
    std::multimap<std::string, std::string> m;
    std::istringstream in(run_ldconfig_p());
    // Lines look like "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6".
    for (std::string l; std::getline(in, l);) {
      auto arrow = l.find(" => ");
      size_t b = l.find_first_not_of(" \t");
      if (arrow == std::string::npos || b == std::string::npos) continue;
      size_t e = l.find(' ', b);
      m.emplace(l.substr(b, e - b), l.substr(arrow + 4));
    }
    return m;
  }();
  return cache;
}

// An object found and loaded: where, and the DT_RPATH dirs of it and its loaders.
struct Loaded {
  std::string path;
  DynInfo info;
  std::vector<std::string> rpath_chain;
};

class Resolver {
 public:
  explicit Resolver(const DynInfo& exe) : class_(exe.elf_class), machine_(exe.machine) {
    if (const char* p = getenv("LD_LIBRARY_PATH"); p && *p) ld_library_path_ = p;
    std::string t = multiarch(machine_);
    if (!t.empty()) defaults_ = {"/lib/" + t, "/usr/lib/" + t};
    for (const char* d : {"/lib64", "/usr/lib64", "/lib", "/usr/lib"}) defaults_.emplace_back(d);
  }

  // The file the loader opens for `name`, needed by `by`; with its DynInfo.
  std::optional<std::pair<std::string, DynInfo>> find(const std::string& name, const Loaded& by) const {
    if (name.find('/') != std::string::npos) return try_file(name);
    std::string origin = fs::path(by.path).parent_path().string();
    auto in_dirs = [&](const std::vector<std::string>& dirs) -> std::optional<std::pair<std::string, DynInfo>> {
      for (const auto& d : dirs)
        if (auto r = try_file(d + "/" + name)) return r;
      return std::nullopt;
    };
    if (by.info.runpath.empty())
      if (auto r = in_dirs(by.rpath_chain)) return r;
    // LD_LIBRARY_PATH's $ORIGIN is the executable's; it rarely holds one.
    if (auto r = in_dirs(split_path(ld_library_path_, exe_origin_, machine_))) return r;
    if (auto r = in_dirs(split_path(by.info.runpath, origin, machine_))) return r;
    auto [lo, hi] = ld_cache().equal_range(name);
    for (auto it = lo; it != hi; ++it)
      if (auto r = try_file(it->second)) return r;
    return in_dirs(defaults_);
  }

  std::string exe_origin_;

 private:
  // `path` if it is an ELF file the executable can load (same class and machine).
  std::optional<std::pair<std::string, DynInfo>> try_file(const std::string& path) const {
    auto d = read_dyn_info(path);
    if (!d || d->elf_class != class_ || d->machine != machine_) return std::nullopt;
    return std::make_pair(path, std::move(*d));
  }

  int class_, machine_;
  std::string ld_library_path_;
  std::vector<std::string> defaults_;
};

}  // namespace

std::vector<std::string> shared_library_deps(const std::string& exe) {
  std::vector<std::string> out;
  auto info = read_dyn_info(exe);
  if (!info) return out;
  std::error_code ec;
  // The loader takes the executable's $ORIGIN from /proc/self/exe: symlinks resolved.
  fs::path real = fs::canonical(exe, ec);
  Resolver res(*info);
  res.exe_origin_ = (ec ? fs::absolute(exe) : real).parent_path().string();

  std::deque<Loaded> queue;
  Loaded root{ec ? exe : real.string(), *info, {}};
  if (root.info.runpath.empty()) root.rpath_chain = split_path(root.info.rpath, res.exe_origin_, info->machine);
  queue.push_back(std::move(root));
  std::set<std::string> names, paths;
  // The loader is mapped before any library; libc needing it by name loads nothing.
  if (!info->interp.empty()) {
    names.insert(fs::path(info->interp).filename().string());
    paths.insert(fs::weakly_canonical(info->interp, ec).string());
  }
  // Breadth first, as the loader maps them; a name or file already loaded is not loaded again.
  while (!queue.empty()) {
    Loaded cur = std::move(queue.front());
    queue.pop_front();
    for (const auto& name : cur.info.needed) {
      if (!names.insert(name).second) continue;
      auto found = res.find(name, cur);
      if (!found) continue;
      auto& [path, dyn] = *found;
      if (!paths.insert(fs::weakly_canonical(path, ec).string()).second) continue;
      out.push_back(path);
      Loaded next{path, std::move(dyn), cur.rpath_chain};
      if (next.info.runpath.empty()) {
        // Its own DT_RPATH is searched before its loaders' (chain is loader-first; prepend).
        auto own = split_path(next.info.rpath, fs::path(path).parent_path().string(), next.info.machine);
        own.insert(own.end(), next.rpath_chain.begin(), next.rpath_chain.end());
        next.rpath_chain = std::move(own);
      }
      queue.push_back(std::move(next));
    }
  }
  return out;
}

}  // namespace cptrace
