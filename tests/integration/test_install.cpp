// `make install` fits a C/C++ build: tests/install/prog.c, built against an installed
// tree once through pkg-config and once through CMake's find_package(cptrace), records
// exactly the events it logs; the installed build-system files name PREFIX, never
// DESTDIR, and the CMake ones still work from wherever the tree is moved.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace testutil;
using json = nlohmann::json;

namespace {

constexpr uint64_t kEvents = 4321;
const std::string kChannel = "install.sample";

bool have(const std::string& tool) { return system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

#define REQUIRE_BUILD_TOOLS()                                                                     \
  do {                                                                                            \
    for (const char* t : {"make", "cc", "pkg-config", "cmake"})                                   \
      if (!have(t)) GTEST_SKIP() << "SKIPPED: " << t << " not installed (tools/install-deps.sh)"; \
  } while (0)

std::string sample_dir() { return (source_dir() / "tests" / "install").string(); }
std::string version() {
  std::string v = read_file(source_dir() / "VERSION");
  return v.substr(0, v.find_first_of("\n"));
}

// `make install` of the already-built files in this build directory. The make
// variables of an enclosing `make test` (its jobserver) must not leak into it.
RunResult make_install(const TempDir& tmp, const std::string& vars) {
  return run("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C " + source_dir().string() +
                 " install BUILD=" + build_dir().string() + " " + vars,
             tmp);
}

// Configures and builds the sample with CMake against the tree at `prefix`.
RunResult cmake_build(const TempDir& tmp, const std::string& prefix, const std::string& bin) {
  return run("{ cmake -S " + sample_dir() + " -B " + bin + " -DCMAKE_PREFIX_PATH=" + prefix + " && cmake --build " +
                 bin + "; }",
             tmp);
}

// Records `prog kEvents` and checks the trace holds exactly tuples 0..kEvents-1 on
// kChannel: the count from `cptrace info --json`, the tuples from `dump --csv`.
void expect_records_every_event(const TempDir& tmp, const std::string& prog, const std::string& name) {
  std::string dir = tmp / name;
  auto rec = run(cptrace_bin() + " record -o " + dir + " -- " + prog + " " + std::to_string(kEvents), tmp);
  ASSERT_EQ(rec.status, 0) << rec.err;

  auto info = run(cptrace_bin() + " info --json " + dir, tmp);
  ASSERT_EQ(info.status, 0) << info.err;
  json j = json::parse(info.out);
  EXPECT_EQ(j.at("dropped").get<uint64_t>(), 0u);
  uint64_t counted = 0;
  for (const json& c : j.at("channels"))
    if (c.at("name") == kChannel) counted = c.at("events").get<uint64_t>();
  EXPECT_EQ(counted, kEvents) << info.out;

  auto dump = run(cptrace_bin() + " dump --csv " + dir, tmp);
  ASSERT_EQ(dump.status, 0) << dump.err;
  std::set<uint64_t> tuples;
  size_t rows = 0;
  std::istringstream lines(dump.out);
  for (std::string line; std::getline(lines, line);) {  // node,kind,ts,channel,tuple,pid,tid,cpu
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    if (f.size() != 8 || f[1] != "user" || f[3] != kChannel) continue;
    rows++;
    tuples.insert(std::stoull(f[4]));
  }
  EXPECT_EQ(rows, kEvents);
  ASSERT_EQ(tuples.size(), kEvents);
  EXPECT_EQ(*tuples.begin(), 0u);
  EXPECT_EQ(*tuples.rbegin(), kEvents - 1);
}

TEST(Install, PkgConfigBuildRecordsEveryEvent) {
  REQUIRE_BUILD_TOOLS();
  REQUIRE_BPF();
  TempDir tmp;
  std::string prefix = tmp / "prefix";
  auto inst = make_install(tmp, "PREFIX=" + prefix);
  ASSERT_EQ(inst.status, 0) << inst.err;

  std::string pc = "PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig pkg-config ";
  auto ver = run(pc + "--modversion cptrace", tmp);
  ASSERT_EQ(ver.status, 0) << ver.err;
  EXPECT_EQ(ver.out, version() + "\n");
  auto ours = run(cptrace_bin() + " --version", tmp);
  EXPECT_NE(ours.out.find("cptrace " + version() + " "), std::string::npos) << ours.out;
  bool jar = std::filesystem::exists(build_dir() / "cptrace.jar");
  EXPECT_EQ(run(pc + "--variable=jar cptrace", tmp).out, jar ? prefix + "/lib/cptrace.jar\n" : "\n");

  std::string prog = tmp / "prog";
  auto cc = run("cc " + sample_dir() + "/prog.c -o " + prog + " $(" + pc + "--cflags --libs cptrace) -Wl,-rpath," +
                    prefix + "/lib",
                tmp);
  ASSERT_EQ(cc.status, 0) << cc.err;
  expect_records_every_event(tmp, prog, "trace");
}

TEST(Install, CMakeFindPackageBuildRecordsEveryEvent) {
  REQUIRE_BUILD_TOOLS();
  REQUIRE_BPF();
  TempDir tmp;
  std::string prefix = tmp / "prefix";
  auto inst = make_install(tmp, "PREFIX=" + prefix);
  ASSERT_EQ(inst.status, 0) << inst.err;

  auto b = cmake_build(tmp, prefix, tmp / "cmake-build");
  ASSERT_EQ(b.status, 0) << b.out << b.err;
  bool jar = std::filesystem::exists(build_dir() / "cptrace.jar");
  EXPECT_NE(b.out.find("cptrace_JAR=" + (jar ? prefix + "/lib/cptrace.jar" : "") + "\n"), std::string::npos) << b.out;
  expect_records_every_event(tmp, tmp / "cmake-build/prog", "trace");
}

// Installed with DESTDIR (a staging tree, as a package build does), the files name
// PREFIX only; the CMake config, which computes its prefix from its own place, works
// from the staging tree as it is.
TEST(Install, DestdirIsNamedNowhereAndCMakeConfigIsRelocatable) {
  REQUIRE_BUILD_TOOLS();
  TempDir tmp;
  const std::string prefix = "/opt/cptrace-install-test";
  std::string stage = tmp / "stage";
  auto inst = make_install(tmp, "DESTDIR=" + stage + " PREFIX=" + prefix);
  ASSERT_EQ(inst.status, 0) << inst.err;
  ASSERT_FALSE(std::filesystem::exists(prefix)) << "installed outside DESTDIR";

  std::string lib = stage + prefix + "/lib";
  for (std::string f :
       {"/pkgconfig/cptrace.pc", "/cmake/cptrace/cptraceConfig.cmake", "/cmake/cptrace/cptraceConfigVersion.cmake"}) {
    ASSERT_TRUE(std::filesystem::exists(lib + f)) << lib + f;
    EXPECT_EQ(read_file(lib + f).find(stage), std::string::npos) << f << " names DESTDIR";
  }
  EXPECT_NE(read_file(lib + "/pkgconfig/cptrace.pc").find("\nprefix=" + prefix + "\n"), std::string::npos);

  auto b = cmake_build(tmp, stage + prefix, tmp / "cmake-build");
  ASSERT_EQ(b.status, 0) << b.out << b.err;
  EXPECT_TRUE(std::filesystem::exists(tmp / "cmake-build/prog"));
}

TEST(Install, CMakeConfigNamesAMissingLibrary) {
  REQUIRE_BUILD_TOOLS();
  TempDir tmp;
  std::string prefix = tmp / "prefix";
  auto inst = make_install(tmp, "PREFIX=" + prefix);
  ASSERT_EQ(inst.status, 0) << inst.err;
  std::filesystem::remove(prefix + "/lib/libcptrace.so");

  auto b = cmake_build(tmp, prefix, tmp / "cmake-build");
  EXPECT_NE(b.status, 0);
  // CMake wraps the message; joined again it names the file.
  std::string all = b.out + b.err;
  std::string joined;
  for (char c : all)
    if (c != '\n' && c != ' ') joined += c;
  EXPECT_NE(joined.find("cptrace:" + prefix + "/lib/libcptrace.soismissing"), std::string::npos) << all;
}

TEST(Install, AskingForANewerVersionFails) {
  REQUIRE_BUILD_TOOLS();
  TempDir tmp;
  std::string prefix = tmp / "prefix";
  auto inst = make_install(tmp, "PREFIX=" + prefix);
  ASSERT_EQ(inst.status, 0) << inst.err;
  std::ofstream(tmp / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.16)\nproject(v C)\n"
                                           "find_package(cptrace 999 REQUIRED)\n";
  auto b = run("cmake -S " + tmp.path.string() + " -B " + (tmp / "b") + " -DCMAKE_PREFIX_PATH=" + prefix, tmp);
  EXPECT_NE(b.status, 0);
  EXPECT_NE((b.out + b.err).find(version()), std::string::npos) << "the installed version is named: " << b.err;
}

TEST(Install, RelativePrefixIsRefused) {
  REQUIRE_BUILD_TOOLS();
  TempDir tmp;
  auto inst = make_install(tmp, "PREFIX=relative/dir");
  EXPECT_NE(inst.status, 0);
  EXPECT_NE(inst.err.find("PREFIX must be an absolute path, got 'relative/dir'"), std::string::npos) << inst.err;
}

}  // namespace
