// Pieces of the load generator, sink and maxrate that need no network: the
// lateness histogram, the id ledger, the intake slope, the round verdict, the
// wire format and argument parsing.
#include <gtest/gtest.h>

#include <random>

#include "load/id_ledger.h"
#include "load/lateness_hist.h"
#include "load/maxrate.h"
#include "load/net_endpoint.h"
#include "load/overhead.h"
#include "load/sink_control.h"
#include "load/tuple_wire.h"

using namespace cptrace;

TEST(LatenessHist, QuantilesWithinBucketPrecision) {
  LatenessHist h;
  std::vector<int64_t> v;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) v.push_back(int64_t(rng() % 5000000));
  for (auto x : v) h.record(x);
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    double exact = double(v[size_t(std::ceil(q * v.size())) - 1]);
    EXPECT_NEAR(double(h.quantile(q)), exact, exact / 64 + 1) << "q=" << q;
    EXPECT_GE(double(h.quantile(q)), exact) << "a quantile is an upper edge, never below the value";
  }
  EXPECT_EQ(h.quantile(1), v.back());
  EXPECT_EQ(h.max(), v.back());
  EXPECT_EQ(h.count(), v.size());
  LatenessHist small;
  for (int i = 0; i < 10; ++i) small.record(i);  // exact below 64 ns
  EXPECT_EQ(small.quantile(0.5), 4);
}

TEST(IdLedger, ClosedRoundCountsGapsDuplicatesAndStrays) {
  IdLedger L;
  L.reset_closed(100, 10);
  for (uint64_t id : {100, 101, 102, 104, 104, 109, 110, 99}) L.mark(id);
  EXPECT_EQ(L.received(), 8u);
  EXPECT_EQ(L.unique(), 5u);
  EXPECT_EQ(L.duplicates(), 1u);
  EXPECT_EQ(L.outside(), 2u);  // 110 and 99
  EXPECT_EQ(L.missing(), 5u);  // 103, 105..108
  EXPECT_EQ(L.first_missing(), 103u);
}

TEST(IdLedger, OpenModeCountsGapsBetweenLowestAndHighest) {
  IdLedger L;
  L.reset_open();
  for (uint64_t id = 5; id < 200000; ++id)
    if (id != 777) L.mark(id);
  L.mark(5);
  EXPECT_EQ(L.unique(), 200000u - 5 - 1);
  EXPECT_EQ(L.duplicates(), 1u);
  EXPECT_EQ(L.missing(), 1u);
  EXPECT_EQ(L.first_missing(), 777u);
}

TEST(SinkControl, SlopeOfALineIsItsRate) {
  std::vector<std::pair<int64_t, uint64_t>> pts;
  for (int i = 0; i < 100; ++i) pts.emplace_back(int64_t(5e12) + i * 10000000ll, uint64_t(4200 * i / 100.0));
  EXPECT_NEAR(slope_per_s(pts), 4200, 42);
  EXPECT_EQ(slope_per_s({}), 0);
}

TEST(Maxrate, VerdictRules) {
  MaxrateRound r;
  r.rate = 1000;
  r.gen.emitted = r.sink.emitted = r.sink.unique = 2000;
  r.gen.achieved_rate = 1000;
  r.gen.elapsed_s = 2;
  r.sink.intake_rate = 995;
  EXPECT_TRUE(judge_round(r, 0.02)) << r.verdict;
  r.sink.intake_rate = 900;  // a consumer 10% slower: the backlog grows
  EXPECT_FALSE(judge_round(r, 0.02));
  EXPECT_NE(r.verdict.find("backlog grows"), std::string::npos);
  r.gen.achieved_rate = 900;  // ... but the generator itself was slow and never blocked
  EXPECT_FALSE(judge_round(r, 0.02));
  EXPECT_NE(r.verdict.find("generator-limited"), std::string::npos);
  r.gen.blocked_s = 0.5;  // blocked by TCP: the consumer's fault, not the generator's
  EXPECT_FALSE(judge_round(r, 0.02));
  EXPECT_NE(r.verdict.find("backlog grows"), std::string::npos);
  r = MaxrateRound{};
  r.rate = 1000;
  r.gen.achieved_rate = r.sink.intake_rate = 1000;
  r.sink.lost = 3;
  EXPECT_FALSE(judge_round(r, 0.02));
  EXPECT_NE(r.verdict.find("lost 3"), std::string::npos);
}

TEST(TupleWire, PreserializedTuplesParseBack) {
  auto buf = preserialize(100, 3);
  ASSERT_EQ(buf.size(), 300u);
  patch_id(buf.data() + 200, 0x1122334455667788ull);
  TupleHeader h;
  ASSERT_TRUE(parse_header(buf.data() + 200, h, kTupleMaxTcp));
  EXPECT_EQ(h.size, 100u);
  EXPECT_EQ(h.id, 0x1122334455667788ull);
  buf[200] ^= 1;
  EXPECT_FALSE(parse_header(buf.data() + 200, h, kTupleMaxTcp));
}

TEST(LoadArgs, EndpointsAndCpuLists) {
  EXPECT_EQ(parse_endpoint("10.0.0.1:80", "--to").port, 80);
  auto e = parse_endpoint("[fd77::2:2]:7000", "--to");
  EXPECT_EQ(e.host, "fd77::2:2");
  EXPECT_EQ(e.str(), "[fd77::2:2]:7000");
  EXPECT_THROW(parse_endpoint("host", "--to"), std::runtime_error);
  EXPECT_THROW(parse_endpoint("host:0", "--to"), std::runtime_error);
  EXPECT_THROW(parse_endpoint("host:70000", "--to"), std::runtime_error);
  EXPECT_EQ(parse_cpu_list("0-2,5,1"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_THROW(parse_cpu_list("3-1"), std::runtime_error);
  EXPECT_EQ(slot_count(20000, 2), 40000u);
  EXPECT_EQ(slot_count(3, 0.5), 2u);  // slots at 0, 1/3 s
}
