// cgroup v2 names for `netlat --cgroup/--container` and `record --cgroup`: what
// is refused, and how (the directories themselves are found by the Netlat
// integration test, on a real hierarchy).
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "os/cgroup_dirs.h"

using namespace cptrace;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CgroupDirs, AnIdIsTakenAsRecorded) {
  EXPECT_EQ(cgroup_of("1", "--cgroup"), 1u);
  EXPECT_EQ(cgroup_of("18446744073709551615", "--cgroup"), 18446744073709551615ull);
  EXPECT_EQ(error_of([] { cgroup_of("0", "--cgroup"); }), "--cgroup 0: not a cgroup id");
  EXPECT_EQ(error_of([] { cgroup_of("18446744073709551616", "--cgroup"); }),
            "--cgroup 18446744073709551616: not a cgroup id");
}

TEST(CgroupDirs, WhatIsNoCgroupDirectoryIsNamed) {
  EXPECT_EQ(error_of([] { cgroup_of("/proc", "--cgroup"); }), "--cgroup /proc: not a cgroup v2 directory");
  EXPECT_EQ(error_of([] { cgroup_of("/no/such/dir", "--cgroup"); }),
            "--cgroup /no/such/dir: No such file or directory");
}

TEST(CgroupDirs, AContainerIdIsTwelveHexDigitsOrMore) {
  for (const char* bad : {"", "abc", "0123456789a", "0123456789AB", "0123456789ab/../x"})
    EXPECT_EQ(error_of([&] { container_cgroup(bad, "--container"); }),
              std::string("--container ") + bad + ": a container id is 12 to 64 lowercase hex digits")
        << bad;
  EXPECT_EQ(error_of([] { container_cgroup(std::string(65, 'a'), "--container"); }),
            "--container " + std::string(65, 'a') + ": a container id is 12 to 64 lowercase hex digits");
}
