// The shared libraries a dynamically linked program loads at start, found the
// way the dynamic loader finds them, by reading ELF files (no ldd, no shell:
// `record -- CMD` runs as root on a path the user chose).
#pragma once
#include <string>
#include <vector>

namespace cptrace {

// Every library `exe` needs, directly or through another library, in the
// loader's breadth-first order, each as the path the loader would open: found
// through the needing object's DT_RPATH (and its loaders', when it has no
// DT_RUNPATH), LD_LIBRARY_PATH of our environment (which the command inherits),
// its DT_RUNPATH, /etc/ld.so.cache (read with `ldconfig -p`, run without a
// shell), then the default directories; $ORIGIN, $LIB and $PLATFORM expanded.
// A library of another ELF class or machine is skipped, as the loader does;
// one not found is left out (the run itself will fail on it). Empty for a
// static or non-ELF file.
std::vector<std::string> shared_library_deps(const std::string& exe);

}  // namespace cptrace
