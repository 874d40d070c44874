// `make install` fits a C/C++ build: tests/install/prog.c, built against an installed
// tree once through pkg-config and once through CMake's find_package(cptrace), records
// exactly the events it logs; the installed build-system files name PREFIX, never
// DESTDIR, and the CMake ones still work from wherever the tree is moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

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

// Records `prog kEvents` with `cptrace` (this build's unless named) and checks the
// trace holds exactly tuples 0..kEvents-1 on kChannel: the count from `cptrace info
// --json`, the tuples from `dump --csv`.
void expect_records_every_event(const TempDir& tmp, const std::string& prog, const std::string& name,
                                const std::string& cptrace = cptrace_bin()) {
  std::string dir = tmp / name;
  auto rec = run(cptrace + " record -o " + dir + " -- " + prog + " " + std::to_string(kEvents), tmp);
  ASSERT_EQ(rec.status, 0) << rec.err;

  auto info = run(cptrace + " info --json " + dir, tmp);
  ASSERT_EQ(info.status, 0) << info.err;
  json j = json::parse(info.out);
  EXPECT_EQ(j.at("dropped").get<uint64_t>(), 0u);
  uint64_t counted = 0;
  for (const json& c : j.at("channels"))
    if (c.at("name") == kChannel) counted = c.at("events").get<uint64_t>();
  EXPECT_EQ(counted, kEvents) << info.out;

  auto dump = run(cptrace + " dump --csv " + dir, tmp);
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

// ---- the Debian package (`make deb`) --------------------------------------------

namespace {

#define REQUIRE_DEB_TOOLS()                                                                               \
  do {                                                                                                    \
    for (const char* t : {"dpkg-deb", "dpkg-shlibdeps", "lintian", "help2man", "man", "systemd-analyze"}) \
      if (!have(t)) GTEST_SKIP() << "SKIPPED: " << t << " not installed (tools/install-deps.sh)";         \
  } while (0)

// Every path under the directories a package may touch, to compare before and after.
std::set<std::string> system_paths(const TempDir& tmp) {
  auto r = run("{ find /usr /etc /opt -xdev 2>/dev/null; ldconfig -p | grep -c libcptrace; }", tmp);
  std::set<std::string> out;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) out.insert(l);
  return out;
}

// Installs the package for one test and removes it on every way out of it.
struct InstalledDeb {
  const TempDir& tmp;
  RunResult result;
  InstalledDeb(const TempDir& t, const std::string& deb) : tmp(t), result(run("dpkg -i " + deb, t)) {}
  ~InstalledDeb() { run("dpkg -r cptrace", tmp); }
};

}  // namespace

// `make deb` builds a lintian-clean package; installed with dpkg it records a program
// built against it through pkg-config and through CMake with no path given; its man
// pages and systemd unit check out; `dpkg -r` leaves the system as it found it.
TEST(Install, DebianPackageInstallsRecordsAndRemovesCleanly) {
  REQUIRE_BUILD_TOOLS();
  REQUIRE_DEB_TOOLS();
  REQUIRE_BPF();
  TempDir tmp;
  ASSERT_NE(run("dpkg-query -W -f='${Status}' cptrace", tmp).out, "install ok installed")
      << "a cptrace package is installed on this machine: the test would replace it (dpkg -r cptrace first)";
  std::string deb = (build_dir() / ("cptrace_" + version() + "_amd64.deb")).string();
  auto mk = run("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C " + source_dir().string() +
                    " deb BUILD=" + build_dir().string(),
                tmp);
  ASSERT_EQ(mk.status, 0) << mk.out << mk.err;

  auto lint = run("lintian --fail-on error,warning " + deb + " 2>/dev/null", tmp);
  EXPECT_EQ(lint.status, 0) << lint.out;
  EXPECT_EQ(lint.out.find("\nE: "), std::string::npos) << lint.out;
  EXPECT_EQ(("\n" + lint.out).find("\nW: "), std::string::npos) << lint.out;

  auto before = system_paths(tmp);
  {
    InstalledDeb installed(tmp, deb);
    ASSERT_EQ(installed.result.status, 0) << installed.result.err;
    EXPECT_EQ(run("/usr/bin/cptrace --version", tmp).out.rfind("cptrace " + version() + " ", 0), 0u);
    EXPECT_EQ(run("pkg-config --modversion cptrace", tmp).out, version() + "\n");
    for (std::string page : {"cptrace", "cptrace-record", "cptrace-translate", "cptrace-minrttd"})
      EXPECT_EQ(run("man -w " + page, tmp).status, 0) << "no man page " << page;
    auto unit = run("systemd-analyze verify /usr/lib/systemd/system/cptrace-minrttd.service", tmp);
    EXPECT_EQ(unit.status, 0) << unit.out << unit.err;

    std::string prog = tmp / "prog";
    auto cc = run("cc " + sample_dir() + "/prog.c -o " + prog + " $(pkg-config --cflags --libs cptrace)", tmp);
    ASSERT_EQ(cc.status, 0) << cc.err;
    // ld.so finds it in the multiarch directory (/lib is /usr/lib on a merged-/usr system).
    EXPECT_NE(run("ldd " + prog, tmp).out.find("x86_64-linux-gnu/libcptrace.so"), std::string::npos);
    expect_records_every_event(tmp, prog, "pkg-config", "/usr/bin/cptrace");

    auto b =
        run("{ cmake -S " + sample_dir() + " -B " + (tmp / "cm") + " && cmake --build " + (tmp / "cm") + "; }", tmp);
    ASSERT_EQ(b.status, 0) << b.out << b.err;
    if (std::filesystem::exists(build_dir() / "cptrace.jar")) {
      EXPECT_NE(b.out.find("cptrace_JAR=/usr/share/java/cptrace.jar\n"), std::string::npos) << b.out;
    }
    expect_records_every_event(tmp, tmp / "cm/prog", "cmake", "/usr/bin/cptrace");
  }
  auto after = system_paths(tmp);
  std::vector<std::string> left, gone;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(left));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(gone));
  EXPECT_TRUE(left.empty()) << "left behind: " << testing::PrintToString(left);
  EXPECT_TRUE(gone.empty()) << "removed: " << testing::PrintToString(gone);
}
