// The test-only simulated clock: exact undo, monotonicity, representable ranges,
// parsing and the meta.json round trip.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "trace/clock_transform.h"

namespace cptrace {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

std::vector<uint64_t> sample_values(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v = {0, 1, 2, 999'999'999, 1'000'000'000, 1'000'000'001};
  for (int i = 0; i < 20000; ++i) v.push_back(rng() >> (rng() % 20 + 4));  // up to 2^60
  for (int i = 0; i < 2000; ++i) v.push_back(1'000'000'000'000'000ull + i);  // ~1e15, consecutive
  return v;
}

TEST(ClockTransform, IdentityWhenDisabled) {
  ClockTransform t;
  for (uint64_t x : {uint64_t(0), uint64_t(12345), kMax64}) {
    EXPECT_EQ(t.apply(x), x);
    EXPECT_EQ(t.undo(x), x);
  }
  EXPECT_TRUE(t.to_json().is_null());
  EXPECT_FALSE(ClockTransform::from_json(nullptr).enabled);
}

TEST(ClockTransform, FormulaAndExactUndoForNonNegativeSkew) {
  for (int64_t ppb : {int64_t(0), int64_t(20'000), int64_t(37'500), int64_t(200'000), int64_t(1'000'000)}) {
    ClockTransform t = ClockTransform::from_params(7'500'000'000, ppb);
    for (uint64_t x : sample_values(ppb)) {
      __int128 want = __int128(x) + 7'500'000'000 + (__int128(x) * ppb) / 1'000'000'000;
      ASSERT_EQ(t.apply(x), uint64_t(want)) << "x=" << x << " ppb=" << ppb;
      ASSERT_EQ(t.undo(t.apply(x)), x) << "x=" << x << " ppb=" << ppb;
    }
  }
}

TEST(ClockTransform, NegativeSkewAndOffsetUndoWithinOneTick) {
  for (int64_t ppb : {int64_t(-20'000), int64_t(-200'000), int64_t(-1'000'000)}) {
    ClockTransform t = ClockTransform::from_params(-3'000'000'000, ppb);
    uint64_t exact = 0, total = 0;
    for (uint64_t x : sample_values(-ppb)) {
      if (x < 4'000'000'000ull) continue;  // below: apply() saturates at 0
      uint64_t y = t.apply(x);
      uint64_t back = t.undo(y);
      ASSERT_TRUE(back == x || back == x + 1) << "x=" << x << " back=" << back;
      ASSERT_EQ(t.apply(back), y);  // undo() lands on a preimage
      exact += back == x;
      total++;
    }
    EXPECT_GT(exact, total * 99 / 100) << "collisions are rare (once per 1e9/|ppb| ticks)";
  }
}

TEST(ClockTransform, MonotoneOverConsecutiveTicks) {
  for (int64_t ppb : {int64_t(-1'000'000), int64_t(-37'000), int64_t(55'000), int64_t(1'000'000)}) {
    ClockTransform t = ClockTransform::from_params(123456789, ppb);
    uint64_t prev = t.apply(5'000'000'000'000ull);
    for (uint64_t x = 5'000'000'000'001ull; x < 5'000'000'000'000ull + 300'000; ++x) {
      uint64_t y = t.apply(x);
      ASSERT_GE(y, prev) << "x=" << x;
      if (ppb >= 0) {
        ASSERT_GT(y, prev) << "strictly increasing for skew >= 0";
      }
      prev = y;
    }
  }
}

TEST(ClockTransform, SecondsOfOffsetAndHundredsOfPpmAreRepresentable) {
  // 3 GHz, -2.5 s, +200 ppm, a TSC after ~4 days of uptime (1e15).
  ClockTransform t = ClockTransform::parse("-2500000000,200", 3e9);
  EXPECT_EQ(t.offset_ticks, -7'500'000'000);
  EXPECT_EQ(t.skew_ppb, 200'000);
  uint64_t x = 1'000'000'000'000'000ull, x2 = x + 3'000'000'000ull;  // one second later
  int64_t d = int64_t(t.apply(x)) - int64_t(x);
  EXPECT_EQ(d, -7'500'000'000 + 200'000'000'000);  // offset + 200 ppm of 1e15
  // One second of TSC becomes 1 s + 200 ppm.
  EXPECT_EQ(t.apply(x2) - t.apply(x), 3'000'000'000ull + 600'000);
  // Saturation instead of wrapping at both ends.
  EXPECT_EQ(t.apply(0), 0u);
  EXPECT_EQ(ClockTransform::from_params(10, 1000).apply(kMax64 - 5), kMax64);
}

TEST(ClockTransform, ParseRefusesBadSpecsNamingThem) {
  for (const char* bad : {"", "100", "abc,1", "1,xyz", "1,2,3", "1,1e9", "99999999999999,0", "1,nan"}) {
    try {
      ClockTransform::parse(bad, 3e9);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--simulate-clock"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ClockTransform::from_params(0, 2'000'000'000), std::invalid_argument);
  ClockTransform t = ClockTransform::parse("1000,-12.5", 2.5e9);
  EXPECT_EQ(t.offset_ticks, 2500);
  EXPECT_EQ(t.skew_ppb, -12'500);
}

TEST(ClockTransform, MetaJsonRoundTrip) {
  ClockTransform t = ClockTransform::parse("-1234567890,-87.125", 2'345'678'000);
  auto j = t.to_json();
  for (const char* k : {"offset_ns", "skew_ppm", "tsc_hz", "offset_ticks", "skew_ppb", "anchor_tsc", "formula"})
    EXPECT_TRUE(j.contains(k)) << k;
  ClockTransform u = ClockTransform::from_json(nlohmann::json::parse(j.dump()));
  for (uint64_t x : sample_values(7)) ASSERT_EQ(u.apply(x), t.apply(x));
  EXPECT_EQ(u.offset_ticks, t.offset_ticks);
  EXPECT_EQ(u.skew_ppb, -87'125);
}

}  // namespace
}  // namespace cptrace
