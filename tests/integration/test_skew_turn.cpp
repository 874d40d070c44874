// One recorder of the machine at a time measures the TSC skew
// (record/skew_turn.h): a second turn waits for the first, up to its bound,
// and gets it once the first is over.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <memory>

#include "record/skew_turn.h"
#include "test_util.h"

using namespace cptrace;

TEST(SkewTurn, OneAtATimeAndBoundedWait) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root to create /run/cptrace";
  auto first = std::make_unique<SkewTurn>();
  ASSERT_TRUE(first->held()) << "/run/cptrace/tsc-skew.lock";
  auto t0 = std::chrono::steady_clock::now();
  SkewTurn second(std::chrono::milliseconds(100));
  EXPECT_FALSE(second.held());  // the first still holds it
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));  // it waited
  first.reset();
  SkewTurn third(std::chrono::milliseconds(100));
  EXPECT_TRUE(third.held());
}
