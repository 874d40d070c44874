#include "probe/instrumented_files.h"

#include <dirent.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "probe/attach_targets.h"
#include "probe/maps_line.h"

namespace cptrace {

std::optional<MappedFile> mapped_file_at(pid_t pid, uint64_t addr) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    auto m = parse_maps_line(line);
    if (m && m->live_file() && addr >= m->start && addr < m->end)
      return MappedFile{m->dev(), m->inode, path_to_mapped_file(pid, *m)};
  }
  return std::nullopt;
}

std::vector<pid_t> all_processes() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long v = strtol(e->d_name, &end, 10);
    if (v > 0 && end && *end == '\0') out.push_back(pid_t(v));
  }
  closedir(d);
  return out;
}

bool InstrumentedFiles::holds_probe_site(const MappedFile& f) {
  auto [it, fresh] = verdict_.try_emplace({f.dev, f.ino}, false);
  if (fresh) it->second = elf_has_probe_site(f.path);
  return it->second;
}

// Only executable mappings: the probe site is code. A file whose path cannot
// be opened (the process ended meanwhile) is checked again when next met.
std::vector<MappedFile> InstrumentedFiles::of_process(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<MappedFile> out;
  for (std::string line; std::getline(maps, line);) {
    auto m = parse_maps_line(line);
    if (!m || !m->live_file() || !m->exec()) continue;
    auto known = verdict_.find({m->dev(), m->inode});
    if (known != verdict_.end() && !known->second) continue;
    MappedFile f{m->dev(), m->inode, path_to_mapped_file(pid, *m)};
    if (known == verdict_.end() && access(f.path.c_str(), R_OK) != 0) continue;
    if (holds_probe_site(f)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace cptrace
