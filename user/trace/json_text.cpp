// JSON text of what came from outside: see json_text.h.
#include "trace/json_text.h"

#include <fmt/format.h>

namespace cptrace {

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), 0 if there is none.
size_t sequence_at(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : 0; };
  auto cont = [&](size_t k) { return (byte(k) & 0xc0) == 0x80; };
  uint8_t b = byte(0);
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    uint8_t lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    return byte(1) >= lo && byte(1) <= hi && cont(2) ? 3 : 0;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    uint8_t lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    return byte(1) >= lo && byte(1) <= hi && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = sequence_at(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", uint8_t(s[i]));
      i += 1;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cptrace
