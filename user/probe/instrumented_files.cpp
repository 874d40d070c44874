#include "probe/instrumented_files.h"

#include <dirent.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "probe/attach_targets.h"

namespace cptrace {

namespace {

struct MapsLine {
  uint64_t start = 0, end = 0;
  bool exec = false;
  uint64_t dev = 0, ino = 0;
  std::string range, path;
};

// "START-END PERMS OFFSET MAJ:MIN INODE PATH"; false for a line without a file.
bool parse_maps_line(const std::string& line, MapsLine& m) {
  char perms[5] = {};
  unsigned maj = 0, min = 0;
  uint64_t off = 0;
  int path_at = 0;
  if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end, perms,
             &off, &maj, &min, &m.ino, &path_at) < 7 ||
      !path_at || line[size_t(path_at)] != '/' || line.ends_with(" (deleted)"))
    return false;
  m.exec = perms[2] == 'x';
  m.dev = makedev(maj, min);
  m.range = line.substr(0, line.find(' '));
  m.path = line.substr(size_t(path_at));
  return true;
}

}  // namespace

std::optional<MappedFile> mapped_file_at(pid_t pid, uint64_t addr) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  MapsLine m;
  for (std::string line; std::getline(maps, line);)
    if (parse_maps_line(line, m) && addr >= m.start && addr < m.end)
      return MappedFile{m.dev, m.ino, path_to_mapped_file(pid, m.range, m.path)};
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
  MapsLine m;
  for (std::string line; std::getline(maps, line);) {
    if (!parse_maps_line(line, m) || !m.exec) continue;
    auto known = verdict_.find({m.dev, m.ino});
    if (known != verdict_.end() && !known->second) continue;
    MappedFile f{m.dev, m.ino, path_to_mapped_file(pid, m.range, m.path)};
    if (known == verdict_.end() && access(f.path.c_str(), R_OK) != 0) continue;
    if (holds_probe_site(f)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace cptrace
