// The test-only simulated clock: exact undo, monotonicity, representable ranges,
// parsing and the meta.json round trip.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "clock/clock_transform.h"

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

namespace cptrace {
namespace {

// A rate change mid-run: +50 ppm, then -30 ppm from a given TSC on.
TEST(ClockTransform, RateChangeAtAGivenTscIsContinuousMonotoneAndUndone) {
  const uint64_t c = 1'000'000'000'000'000ull;
  ClockTransform t = ClockTransform::from_params(2'000'000'000, 50'000);
  t.with_change(c, -30'000);
  for (uint64_t x : std::vector<uint64_t>{c - 1000000000, c - 1, c, c + 1, c + 3000000000}) {
    __int128 first = __int128(std::min(x, c)) * 50'000, second = x > c ? __int128(x - c) * -30'000 : 0;
    __int128 s = first + second;
    __int128 q = s / 1'000'000'000 - (s % 1'000'000'000 < 0 ? 1 : 0);
    EXPECT_EQ(t.apply(x), uint64_t(__int128(x) + 2'000'000'000 + q)) << x;
  }
  // Slope 1 + 50e-6 before, 1 - 30e-6 after, and no jump at the change.
  EXPECT_EQ(t.apply(c) - t.apply(c - 1'000'000'000), 1'000'050'000u);
  EXPECT_EQ(t.apply(c + 1'000'000'000) - t.apply(c), 999'970'000u);
  uint64_t prev = t.apply(c - 200'000), exact = 0, total = 0;
  for (uint64_t x = c - 199'999; x < c + 200'000; ++x) {
    uint64_t y = t.apply(x);
    ASSERT_GE(y, prev);
    prev = y;
    uint64_t back = t.undo(y);
    ASSERT_TRUE(back == x || back == x + 1) << x;
    ASSERT_EQ(t.apply(back), y);
    exact += back == x, total++;
  }
  EXPECT_GT(exact, total * 99 / 100);
  // Far past the change the first guess of undo() must still land (not walk for ever).
  uint64_t far = c + 400'000'000'000'000ull;
  EXPECT_EQ(t.apply(t.undo(t.apply(far))), t.apply(far));
  ClockTransform back = ClockTransform::from_json(t.to_json());
  EXPECT_TRUE(back.has_change);
  EXPECT_EQ(back.change_tsc, c);
  EXPECT_EQ(back.skew2_ppb, -30'000);
  EXPECT_EQ(back.apply(c + 12345678901ull), t.apply(c + 12345678901ull));
}

TEST(ClockTransform, ParsesARateChangeAndRefusesBadOnes) {
  ClockTransform t = ClockTransform::parse("1000,50,123456789012,-30", 2.1e9);
  EXPECT_TRUE(t.has_change);
  EXPECT_EQ(t.change_tsc, 123456789012u);
  EXPECT_EQ(t.skew2_ppb, -30'000);
  EXPECT_NE(t.warning().find("-30 ppm"), std::string::npos);
  auto msg = [](const std::string& spec) {
    try {
      ClockTransform::parse(spec, 2.1e9);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg("1000,50,123").find("2 or 4"), std::string::npos);
  EXPECT_NE(msg("1000,50,-5,10").find("CHANGE_TSC"), std::string::npos);
  EXPECT_NE(msg("1000,50,12x,10").find("CHANGE_TSC"), std::string::npos);
  EXPECT_NE(msg("1000,50,100,2000").find("SKEW2_PPM"), std::string::npos);
  EXPECT_NE(msg("1000,50,100,abc").find("not numbers"), std::string::npos);
  EXPECT_FALSE(ClockTransform::parse("1000,50", 2.1e9).has_change);
}

}  // namespace
}  // namespace cptrace
