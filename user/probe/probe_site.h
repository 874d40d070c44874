// Where a uprobe goes in a probe site of ours, checked from the ELF's bytes.
// A site (lib/probe_site.h, bytes in include/cptrace_probe_site.h) is a TSC
// stamp, then the nop the uprobe sits on, then `ret`. A symbol of that name
// without the stamp (a library built before the stamp existed, or someone
// else's function) would give the programs no call-time TSC in rax: such a
// site is refused, never recorded with garbage stamps.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace cptrace {

class ProbeSiteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file offset of the site's nop in `symbol` of the ELF file `path`
// (symbol + CP_SITE_NOP_OFFSET). nullopt if the file does not define the
// symbol. Throws ProbeSiteError, naming the file and the symbol, when the
// symbol's bytes are not exactly a probe site of this version; ProcRegistryError
// when the file cannot be read as ELF.
std::optional<uint64_t> probe_site_file_offset(const std::string& path, const std::string& symbol);

// The site that single events reach in the ELF file `path`: "cp_logTS_site"
// where the file defines it (libraries whose cp_logTS may buffer events,
// lib/single_route.c), else "cp_logTS" (libraries where cp_logTS is the site).
std::string single_event_site(const std::string& path);

// "nop5 (0f 1f 44 00 00)": the nop form of our sites, for messages.
std::string probe_site_nop_form();

}  // namespace cptrace
