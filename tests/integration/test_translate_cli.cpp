// `cptrace translate` refuses bad choice values through the one parse function.
#include <gtest/gtest.h>

#include <filesystem>

#include "synthetic_trace.h"
#include "test_util.h"

namespace cptrace {
namespace {

using testutil::SyntheticTrace;
using testutil::TempDir;

// 300 events of node "synth" on two channels and two CPUs, 1 us apart.
std::string one_node(const TempDir& tmp) {
  SyntheticTrace t;
  t.channels = {{11, "a"}, {12, "b"}};
  for (uint64_t i = 0; i < 300; ++i) t.add(11 + i % 2, SyntheticTrace::kOrigin + 1000 * i, i / 2, uint16_t(i % 3 == 0));
  std::string dir = tmp / "synth";
  t.write(dir);
  return dir;
}

// Each choice is checked once, by its parse function: the message names the
// flag, the bad value and the values there are.
TEST(TranslateCli, BadChoiceNamesFlagAndValue) {
  TempDir tmp;
  std::string in = one_node(tmp);
  const std::pair<std::string, std::string> cases[] = {
      {"--method fast", "--method fast: must be ratio, hull or best"},
      {"--clock-model cubic", "--clock-model cubic: must be linear or piecewise"},
      {"--inputs packets", "--inputs packets: must be both, rounds or traffic"},
  };
  for (const auto& [args, message] : cases) {
    auto r = testutil::run(testutil::cptrace_bin() + " translate " + in + " " + args + " -o " + (tmp / "out"), tmp);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "out")) << args;
  }
}

}  // namespace
}  // namespace cptrace
