#include "os/cgroup_dirs.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace cptrace {

namespace fs = std::filesystem;

std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream f(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    if (f >> id >> parent >> dev >> root >> mount) return mount;
  }
  return "";
}

uint64_t cgroup_dir_id(const std::string& path, const std::string& flag) {
  struct statfs sfs {};
  struct stat st {};
  if (statfs(path.c_str(), &sfs) != 0 || stat(path.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("{} {}: {}", flag, path, strerror(errno)));
  if (sfs.f_type != CGROUP2_SUPER_MAGIC || !S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("{} {}: not a cgroup v2 directory", flag, path));
  return st.st_ino;  // the cgroup id bpf_get_current_cgroup_id() returns
}

uint64_t cgroup_of(const std::string& text, const std::string& flag) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    errno = 0;
    unsigned long long v = strtoull(text.c_str(), nullptr, 10);
    if (errno || v == 0) throw std::runtime_error(fmt::format("{} {}: not a cgroup id", flag, text));
    return v;
  }
  return cgroup_dir_id(text, flag);
}

namespace {

// The container id a runtime's directory name carries ("" when it is none): a
// systemd scope of a runtime, or a directory named by the 64-digit id alone
// (the runtimes' cgroupfs layouts: /docker/ID, /kubepods/.../pod.../ID).
std::string container_of(const std::string& name) {
  for (const char* prefix : {"docker-", "cri-containerd-", "crio-", "libpod-"}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) == 0 && name.size() > p.size() + 6 &&
        name.compare(name.size() - 6, 6, ".scope") == 0)
      return name.substr(p.size(), name.size() - p.size() - 6);
  }
  if (name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos) return name;
  return "";
}

}  // namespace

uint64_t container_cgroup(const std::string& id, const std::string& flag) {
  if (id.size() < 12 || id.size() > 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::runtime_error(fmt::format("{} {}: a container id is 12 to 64 lowercase hex digits", flag, id));
  std::string root = cgroup2_mount();
  if (root.empty()) throw std::runtime_error(fmt::format("{} {}: no cgroup v2 hierarchy is mounted here", flag, id));
  std::vector<fs::path> found;
  std::error_code ec;
  // Directories only, never through a symlink (cgroupfs has none; a bind mount could).
  for (fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const std::string c = container_of(it->path().filename().string());
    if (c.size() >= id.size() && c.compare(0, id.size(), id) == 0 && c.find('.') == std::string::npos)
      found.push_back(it->path());
  }
  if (found.empty())
    throw std::runtime_error(
        fmt::format("{} {}: no cgroup of that container under {} (on another machine than the node, give --cgroup ID)",
                    flag, id, root));
  if (found.size() > 1)
    throw std::runtime_error(fmt::format("{} {}: {} cgroups match ({} and {}): give more digits", flag, id,
                                         found.size(), found[0].string(), found[1].string()));
  return cgroup_dir_id(found[0].string(), flag);
}

}  // namespace cptrace
