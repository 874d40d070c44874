// Finding a program's shared libraries by reading ELF files, the way the loader
// does, gives what ldd gives (ldd runs the loader itself: the reference).
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "probe/attach_targets.h"
#include "probe/shared_deps.h"
#include "test_util.h"

using namespace cptrace;
using namespace testutil;

namespace {

// Canonical paths, so build/tests/../libcptrace.so and build/libcptrace.so compare equal.
std::set<std::string> canonical_set(const std::vector<std::string>& paths) {
  std::set<std::string> out;
  for (const auto& p : paths) out.insert(fs::canonical(p).string());
  return out;
}

// The "name => /path" lines of ldd's output (the vdso and the loader have no "=> /").
// ldd is given the real path: it runs the loader explicitly, which then takes
// $ORIGIN from the path it was given, where the kernel's exec of a symlink
// (/usr/bin/java) gives the target's directory, as shared_library_deps does.
std::set<std::string> ldd_libs(const std::string& exe) {
  TempDir tmp;
  auto r = run("ldd '" + fs::canonical(exe).string() + "'", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> paths;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    auto arrow = l.find("=> /");
    if (arrow == std::string::npos) continue;
    std::string p = l.substr(arrow + 3);
    paths.push_back(p.substr(0, p.find(' ')));
  }
  return canonical_set(paths);
}

}  // namespace

TEST(SharedDeps, WorkloadNeedsTheLibcptraceItLinksAgainst) {
  std::string exe = (build_dir() / "tests" / "workload").string();
  auto libs = canonical_set(shared_library_deps(exe));
  // Found through the workload's RUNPATH ($ORIGIN/..), not through a system directory.
  EXPECT_TRUE(libs.count(fs::canonical(build_dir() / "libcptrace.so").string()))
      << "libcptrace.so of the build directory not among the workload's libraries";
  EXPECT_EQ(libs, ldd_libs(exe));
}

TEST(SharedDeps, SameAsLddForSystemPrograms) {
  // cptrace itself: libbpf, libelf, zstd, libstdc++ and their own dependencies.
  for (const std::string& cmd : {std::string("sleep"), std::string("ls"), std::string("java"), cptrace_bin()}) {
    std::string exe = resolve_in_path(cmd);
    if (exe.empty()) continue;  // java is optional
    auto libs = canonical_set(shared_library_deps(exe));
    EXPECT_FALSE(libs.empty()) << exe;
    EXPECT_EQ(libs, ldd_libs(exe)) << exe;
  }
}

TEST(SharedDeps, NonElfAndMissingFilesHaveNone) {
  EXPECT_TRUE(shared_library_deps("/etc/passwd").empty());
  EXPECT_TRUE(shared_library_deps("/nonexistent/program").empty());
}
