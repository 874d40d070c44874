// netlat's grouping by flow (netlat/flow_stats.h): what each side sent and
// received, TCP retransmissions and out-of-order arrivals in stamp order, and
// percentiles whose bounds are the order statistics of the lows and the highs.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "netlat/flow_stats.h"

namespace cptrace {
namespace {

NetEvent seg(uint64_t ts, uint8_t kind, uint32_t seq, uint32_t len) {
  NetEvent e;
  e.ts = ts;
  e.r.kind = kind, e.r.proto = IPPROTO_TCP, e.r.family = AF_INET;
  e.r.sport = 5000, e.r.dport = 80, e.r.seq = seq, e.r.len = len;
  inet_pton(AF_INET, "10.0.0.1", e.r.saddr);
  inet_pton(AF_INET, "10.0.0.2", e.r.daddr);
  return e;
}

TEST(FlowStats, RetransmissionsAndOutOfOrderCountInStampOrder) {
  NodePackets sender, receiver;
  // File order is per-CPU ring order, not time order: the table sorts by stamp.
  sender.events = {seg(30, CP_NET_PKT_TX, 0xfffffff0u, 100), seg(10, CP_NET_PKT_TX, 0xffffff00u, 0xf0),
                   seg(50, CP_NET_PKT_TX, 0xfffffff0u, 100), seg(60, CP_NET_PKT_TX, 0x54u, 10),
                   seg(70, CP_NET_PKT_TX, 0x50u, 0)};  // a pure ACK: not data
  receiver.events = {seg(40, CP_NET_PKT_RX, 0xfffffff0u, 100), seg(20, CP_NET_PKT_RX, 0xffffff00u, 0xf0),
                     seg(65, CP_NET_PKT_RX, 0x54u, 10), seg(66, CP_NET_PKT_RX, 0xfffffff0u, 100)};
  FlowTable t;
  auto all = [](const NetEvent&) { return true; };
  t.count_packets(0, sender, all);
  t.count_packets(1, receiver, all);
  ASSERT_EQ(t.sides().size(), 1u);
  const auto& [flow, by_node] = *t.sides().begin();
  EXPECT_EQ(flow.text(), "tcp 10.0.0.1:5000 -> 10.0.0.2:80");
  EXPECT_EQ(by_node.at(0).tx, 4u);
  EXPECT_EQ(by_node.at(0).retransmitted, 1u) << "the second send of 0xfffffff0, across the wrap";
  EXPECT_EQ(by_node.at(1).rx, 4u);
  EXPECT_EQ(by_node.at(1).out_of_order, 1u) << "the duplicate arriving after byte 0x5e";
}

TEST(FlowStats, PercentileBoundsAreTheOrderStatisticsOfLowsAndHighs) {
  // Truths 10, 20, 30, 40 inside these bounds, whose lows and highs sort differently.
  std::vector<NsBound> d = {{12, 5, 41}, {21, 18, 22}, {30, 29, 31}, {40, 1, 45}};
  DelaySummary s = summarize(d);
  EXPECT_EQ(s.count, 4u);
  // p50 = the 2nd smallest (nearest rank): lows 1 5 18 29, highs 22 31 41 45, estimates 12 21 30 40.
  EXPECT_EQ(s.p.p50.lo, 5);
  EXPECT_EQ(s.p.p50.hi, 31);
  EXPECT_EQ(s.p.p50.ns, 21);
  EXPECT_EQ(s.p.max.lo, 29);
  EXPECT_EQ(s.p.max.hi, 45);
  EXPECT_EQ(s.p.min.lo, 1);
  EXPECT_EQ(s.p.min.hi, 22);
  // Widths 36 4 2 44: the median (upper) is 36.
  EXPECT_EQ(s.width_p50, 36);
  EXPECT_EQ(summarize({}).count, 0u);
}

}  // namespace
}  // namespace cptrace
