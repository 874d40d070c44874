// libFuzzer target: any text as /proc/PID/maps (probe/maps_line.h), whose
// paths a traced process chooses. Each line parses or is refused; a parsed
// line keeps its path as the line's own tail, and printed back the way the
// kernel prints it, parses to the same fields.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "probe/maps_line.h"

using namespace cptrace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    auto m = parse_maps_line(line);
    if (!m) continue;
    if (m->end < m->start || m->perms.size() != 4 || !line.ends_with(m->path)) __builtin_trap();
    std::string name = m->map_files_name();
    if (name.size() > 1 && name[0] == '0' && name[1] != '-') __builtin_trap();  // no padding
    std::string again = fmt::format("{:08x}-{:08x} {} {:08x} {:02x}:{:02x} {} {}", m->start, m->end, m->perms,
                                    m->offset, m->dev_major, m->dev_minor, m->inode, m->path);
    auto n = parse_maps_line(again);
    if (!n || n->start != m->start || n->end != m->end || n->offset != m->offset || n->inode != m->inode ||
        n->dev() != m->dev() || n->perms != m->perms || n->path != m->path)
      __builtin_trap();
  }
  return 0;
}
