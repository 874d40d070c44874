// One line of /proc/PID/maps, parsed once for every reader of it (the hello's
// instrumented files, the channel registry of -p, the targets of a process).
// The path part is the process's to choose (any file name it maps), so the
// parser takes nothing for granted past the fixed fields; it is fuzzed
// (tests/fuzz/fuzz_maps_line.cpp).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cptrace {

struct MapsLine {
  uint64_t start = 0, end = 0, offset = 0, inode = 0;
  unsigned dev_major = 0, dev_minor = 0;
  std::string perms;  // "r-xp"
  std::string path;  // "" (anonymous), "[heap]", "/lib/x.so", "/x (deleted)"
  bool exec() const { return perms.size() > 2 && perms[2] == 'x'; }
  // A file path, and the file still there (the kernel appends " (deleted)").
  bool live_file() const;
  dev_t dev() const;
  // This mapping's name under /proc/PID/map_files/: "START-END" in hex without
  // the zero padding maps prints ("400000-401000" for "00400000-00401000").
  std::string map_files_name() const;
};

// "START-END PERMS OFFSET MAJ:MIN INODE [PATH]"; nullopt for anything else.
std::optional<MapsLine> parse_maps_line(std::string_view line);

}  // namespace cptrace
