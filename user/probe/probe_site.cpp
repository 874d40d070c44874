#include "probe/probe_site.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cptrace_probe_site.h"
#include "probe/proc_registry.h"

namespace cptrace {

namespace {

constexpr std::array<uint8_t, CP_SITE_NOP_OFFSET> kStamp = {CP_SITE_STAMP_BYTES};
constexpr std::array<uint8_t, CP_SITE_NOP_LEN> kNop = {CP_SITE_NOP_BYTES};
constexpr size_t kSiteLen = CP_SITE_NOP_OFFSET + CP_SITE_NOP_LEN + 1;  // + ret

std::string hex(const uint8_t* b, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", b[i]);
  return s;
}

// The whole site as the macro emits it.
std::array<uint8_t, kSiteLen> expected_site() {
  std::array<uint8_t, kSiteLen> e{};
  std::memcpy(e.data(), kStamp.data(), kStamp.size());
  std::memcpy(e.data() + kStamp.size(), kNop.data(), kNop.size());
  e[kSiteLen - 1] = CP_SITE_RET;
  return e;
}

}  // namespace

std::string probe_site_nop_form() { return fmt::format("{} ({})", CP_SITE_NOP_NAME, hex(kNop.data(), kNop.size())); }

std::string single_event_site(const std::string& path) {
  return elf_symbol_file_offset(path, "cp_logTS_site") ? "cp_logTS_site" : "cp_logTS";
}

std::optional<uint64_t> probe_site_file_offset(const std::string& path, const std::string& symbol) {
  auto off = elf_symbol_file_offset(path, symbol);
  if (!off) return std::nullopt;
  // The file, not a process's memory: a uprobe never changes the file's bytes.
  std::array<uint8_t, kSiteLen> got{};
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ProbeSiteError(fmt::format("{}: reading the probe site {}: {}", path, symbol, strerror(errno)));
  ssize_t n = pread(fd, got.data(), got.size(), off_t(*off));
  close(fd);
  const auto want = expected_site();
  if (n == ssize_t(got.size()) && got == want) return *off + CP_SITE_NOP_OFFSET;
  std::string found = n > 0 ? hex(got.data(), size_t(n)) : "nothing";
  bool old_form = n >= ssize_t(kNop.size()) && std::memcmp(got.data(), kNop.data(), kNop.size()) == 0;
  throw ProbeSiteError(
      fmt::format("{}: {} is not a cptrace probe site of this version: expected the TSC stamp then {} at +{} ({}), "
                  "found {}{}; rebuild it against this cptrace (its events would carry no call-time TSC stamp)",
                  path, symbol, probe_site_nop_form(), CP_SITE_NOP_OFFSET, hex(want.data(), want.size()), found,
                  old_form ? " (a site built before the stamp: a bare nop5 at the symbol)" : ""));
}

}  // namespace cptrace
