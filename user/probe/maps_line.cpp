#include "probe/maps_line.h"

#include <sys/sysmacros.h>

#include <charconv>

#include <fmt/format.h>

namespace cptrace {

namespace {

// Reads a number in `base` at the front of `s` and drops it; false if none.
template <class T>
bool take_number(std::string_view& s, T& v, int base) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(size_t(p - s.data()));
  return true;
}

bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

// One or more spaces; false if none.
bool take_spaces(std::string_view& s) {
  size_t n = s.find_first_not_of(' ');
  if (n == 0 || s.empty()) return false;
  s.remove_prefix(n == std::string_view::npos ? s.size() : n);
  return true;
}

}  // namespace

bool MapsLine::live_file() const {
  constexpr std::string_view kDeleted = " (deleted)";
  return !path.empty() && path.front() == '/' && !std::string_view(path).ends_with(kDeleted);
}

dev_t MapsLine::dev() const { return makedev(dev_major, dev_minor); }

std::string MapsLine::map_files_name() const { return fmt::format("{:x}-{:x}", start, end); }

std::optional<MapsLine> parse_maps_line(std::string_view s) {
  MapsLine m;
  if (!take_number(s, m.start, 16) || !take_char(s, '-') || !take_number(s, m.end, 16) || !take_spaces(s))
    return std::nullopt;
  size_t sp = s.find(' ');
  if (sp != 4) return std::nullopt;  // "rwxp"
  m.perms = std::string(s.substr(0, 4));
  s.remove_prefix(4);
  if (!take_spaces(s) || !take_number(s, m.offset, 16) || !take_spaces(s) || !take_number(s, m.dev_major, 16) ||
      !take_char(s, ':') || !take_number(s, m.dev_minor, 16) || !take_spaces(s) || !take_number(s, m.inode, 10))
    return std::nullopt;
  if (m.end < m.start) return std::nullopt;
  if (!s.empty() && !take_spaces(s)) return std::nullopt;
  m.path = std::string(s);
  return m;
}

}  // namespace cptrace
