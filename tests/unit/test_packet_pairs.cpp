// Packet matching across node traces (translate/packet_pairs.h) on synthetic
// captures with known clocks: every constraint produced must hold for the true
// clock map, and the doubtful cases (retransmissions, GSO/GRO, sequence wrap, lost
// records, duplicate keys, forwarded flows) must be handled as documented.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "translate/packet_pairs.h"

namespace cptrace {
namespace {

// Node clocks: ticks = offset + rate * t (t in true ns).
struct SimClock {
  long double offset, rate;
  uint64_t at(long double t) const { return uint64_t(std::floor(offset + rate * t)); }
};
const SimClock kA{1.0e12L, 2.5L * (1 + 40e-6L)}, kB{7.3e12L, 2.5L * (1 - 25e-6L)};

struct Capture {
  std::vector<NodePackets> nodes;
  std::vector<SimClock> clocks;
  explicit Capture(std::vector<SimClock> c) : nodes(c.size()), clocks(std::move(c)) {}

  cp_net_rec rec(uint8_t kind, uint8_t proto, const char* src, uint16_t sport, const char* dst, uint16_t dport) {
    cp_net_rec r{};
    r.kind = kind, r.proto = proto, r.family = AF_INET, r.sport = sport, r.dport = dport;
    inet_pton(AF_INET, src, r.saddr);
    inet_pton(AF_INET, dst, r.daddr);
    return r;
  }
  void put(size_t node, long double t, cp_net_rec r) { nodes[node].events.push_back({clocks[node].at(t), r}); }

  // A TCP segment from 10.0.0.1:5000 (node 0) to 10.0.0.2:80 (node 1) or back.
  cp_net_rec seg(uint8_t kind, bool from0, uint32_t seq, uint32_t len, uint8_t flags = 0x10) {
    cp_net_rec r = from0 ? rec(kind, IPPROTO_TCP, "10.0.0.1", 5000, "10.0.0.2", 80)
                         : rec(kind, IPPROTO_TCP, "10.0.0.2", 80, "10.0.0.1", 5000);
    r.seq = seq, r.len = len, r.tcp_flags = flags;
    return r;
  }
  // tx on `from`'s node at t, rx on the other at t + d (d < 0: never received).
  void tcp(bool from0, long double t, long double d, uint32_t seq, uint32_t len, uint8_t flags = 0x10) {
    put(from0 ? 0 : 1, t, seg(CP_NET_PKT_TX, from0, seq, len, flags));
    if (d >= 0) put(from0 ? 1 : 0, t + d, seg(CP_NET_PKT_RX, from0, seq, len, flags));
  }
  void handshake(uint32_t isn0, uint32_t isn1, long double t = 0) {
    tcp(true, t, 50, isn0, 0, 0x02);
    tcp(false, t + 60, 50, isn1, 0, 0x12);
  }
};

// Every constraint of the pair (from, to) holds for the true map from -> to.
void expect_true(const Capture& c, size_t from, size_t to, const Constraints& k) {
  auto f = [&](int64_t x) {  // from-clock value -> to-clock value at the same true instant
    long double t = ((long double)x - c.clocks[from].offset) / c.clocks[from].rate;
    return c.clocks[to].offset + c.clocks[to].rate * t;
  };
  // A stamp is a floor of the true value: allow the one tick of that floor.
  for (const Pt& p : k.above) EXPECT_LE(f(p.x) - 1, (long double)p.y + 1) << "above " << p.x << "," << p.y;
  for (const Pt& p : k.below) EXPECT_GE(f(p.x) + 1, (long double)p.y) << "below " << p.x << "," << p.y;
}

TEST(PacketPairs, TcpRetransmissionIsBoundedByTheFirstTransmission) {
  Capture c({kA, kB});
  c.handshake(1000, 9000);
  c.tcp(true, 200, -1, 1001, 100);  // lost on the wire
  c.tcp(true, 800, 40, 1001, 100);  // retransmitted, received at 840
  c.tcp(false, 900, 40, 9001, 10);  // a reply
  PacketMatches m = match_packets(c.nodes);
  Constraints k = m.constraints(0, 1);
  ASSERT_EQ(k.above.size(), 1u);
  // The receive is bounded by the FIRST transmission (t=200), not the one that arrived.
  EXPECT_EQ(k.above[0].x, int64_t(kA.at(200)));
  EXPECT_EQ(k.above[0].y, int64_t(kB.at(840)));
  ASSERT_EQ(k.below.size(), 1u);
  EXPECT_EQ(k.below[0].x, int64_t(kA.at(940)));
  EXPECT_EQ(k.below[0].y, int64_t(kB.at(900)));
  EXPECT_EQ(m.total.matched, 2u);
  EXPECT_EQ(m.counts(0, 1), (std::pair<size_t, size_t>{1, 1}));
  expect_true(c, 0, 1, k);
  // The reverse orientation is the transpose.
  Constraints r = m.constraints(1, 0);
  ASSERT_EQ(r.above.size(), 1u);
  EXPECT_EQ(r.above[0], (Pt{k.below[0].y, k.below[0].x}));
  expect_true(c, 1, 0, r);
}

// A stamp with an error constrains the clocks at its causal end (a transmit at
// its earliest instant, a receive at its latest), and the events handed in stay
// as recorded: netlat bounds each delay from the same events.
TEST(PacketPairs, StampErrorsConstrainAtTheCausalEndsAndLeaveTheEvents) {
  Capture c({kA, kB});
  c.handshake(1000, 9000);
  c.tcp(true, 200, 40, 1001, 100);
  c.tcp(false, 300, 40, 9001, 10);
  for (NodePackets& n : c.nodes)
    for (NetEvent& e : n.events) e.ts_err = 7;
  const std::vector<NodePackets> before = c.nodes;
  PacketMatches m = match_packets(c.nodes);
  Constraints k = m.constraints(0, 1);
  ASSERT_EQ(k.above.size(), 1u);  // data 0 -> 1: sent no earlier than ts - 7, received no later than ts + 7
  EXPECT_EQ(k.above[0].x, int64_t(kA.at(200)) - 7);
  EXPECT_EQ(k.above[0].y, int64_t(kB.at(240)) + 7);
  ASSERT_EQ(k.below.size(), 1u);  // the reply 1 -> 0, seen from 0's side
  EXPECT_EQ(k.below[0].x, int64_t(kA.at(340)) + 7);
  EXPECT_EQ(k.below[0].y, int64_t(kB.at(300)) - 7);
  for (size_t n = 0; n < c.nodes.size(); ++n)
    for (size_t i = 0; i < c.nodes[n].events.size(); ++i) {
      EXPECT_EQ(c.nodes[n].events[i].ts, before[n].events[i].ts);
      EXPECT_EQ(c.nodes[n].events[i].ts_err, 7u);
    }
}

TEST(PacketPairs, EachMatchNamesItsTransmitAndReceive) {
  Capture c({kA, kB});
  c.handshake(1000, 9000);
  c.tcp(true, 200, -1, 1001, 100);  // node 0 event 2: the first transmission, lost
  c.tcp(true, 800, 40, 1001, 100);  // node 0 event 3, received as node 1 event 2
  c.tcp(false, 900, 40, 9001, 10);  // node 1 event 3, received as node 0 event 4
  std::vector<PacketMatch> pairs;
  PacketMatches m = match_packets(c.nodes, &pairs);
  ASSERT_EQ(pairs.size(), m.total.matched);
  std::sort(pairs.begin(), pairs.end(),
            [](const PacketMatch& a, const PacketMatch& b) { return a.tx_node < b.tx_node; });
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].tx_node, 0u);
  EXPECT_EQ(pairs[0].rx_node, 1u);
  EXPECT_EQ(pairs[0].tx, 2u) << "the first transmission, as the constraint uses";
  EXPECT_EQ(pairs[0].rx, 2u);
  EXPECT_EQ(pairs[1].tx_node, 1u);
  EXPECT_EQ(pairs[1].tx, 3u);
  EXPECT_EQ(pairs[1].rx, 4u);
  EXPECT_EQ(c.nodes[0].events[pairs[0].tx].ts, kA.at(200));
}

TEST(PacketPairs, GsoSuperPacketAndGroMergeMatchByByteRange) {
  Capture c({kA, kB});
  c.handshake(5, 77);
  // One GSO super-packet of 3000 bytes, received as three wire segments.
  c.put(0, 300, c.seg(CP_NET_PKT_TX, true, 6, 3000));
  for (int i = 0; i < 3; ++i) c.put(1, 340 + i, c.seg(CP_NET_PKT_RX, true, 6 + 1000 * i, 1000));
  // Three segments sent apart, received as one GRO-merged packet.
  for (int i = 0; i < 3; ++i) c.put(0, 400 + 10 * i, c.seg(CP_NET_PKT_TX, true, 3006 + 500 * i, 500));
  c.put(1, 470, c.seg(CP_NET_PKT_RX, true, 3006, 1500));
  PacketMatches m = match_packets(c.nodes);
  Constraints k = m.constraints(0, 1);
  ASSERT_EQ(k.above.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(k.above[i].x, int64_t(kA.at(300)));
  EXPECT_EQ(k.above[3].x, int64_t(kA.at(420)));  // its last byte left last
  expect_true(c, 0, 1, k);
}

TEST(PacketPairs, SequenceNumbersWrap) {
  Capture c({kA, kB});
  uint32_t isn = 0xffffffffu - 2500;
  c.handshake(isn, 1);
  for (int i = 0; i < 6; ++i) c.tcp(true, 200 + 10 * i, 30, isn + 1 + 1000 * i, 1000);
  PacketMatches m = match_packets(c.nodes);
  Constraints k = m.constraints(0, 1);
  ASSERT_EQ(k.above.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(k.above[i].x, int64_t(kA.at(200 + 10 * i)));
  expect_true(c, 0, 1, k);
}

TEST(PacketPairs, MissingHandshakeOrLostTransmitRecordGivesNoConstraint) {
  Capture c({kA, kB});
  // Data of a connection whose SYN was before the capture: never matched.
  c.tcp(true, 100, 30, 500, 100);
  c.handshake(1000, 2000, 200);
  // Bytes [0,100) of the new connection: their transmit record is missing, then a
  // retransmission: it must not pass for the first transmission.
  c.put(1, 420, c.seg(CP_NET_PKT_RX, true, 1001, 100));
  c.tcp(true, 400, 30, 1101, 100);  // sent after a gap in what the sender recorded
  c.tcp(true, 600, 30, 1001, 100);  // retransmission of the gap
  PacketMatches m = match_packets(c.nodes);
  EXPECT_EQ(m.total.no_handshake, 1u);
  EXPECT_EQ(m.total.unmatched, 2u);  // both receives of [0,100)
  Constraints k = m.constraints(0, 1);
  ASSERT_EQ(k.above.size(), 1u);
  EXPECT_EQ(k.above[0].x, int64_t(kA.at(400)));
  expect_true(c, 0, 1, k);
}

TEST(PacketPairs, UdpUniqueKeysMatchDuplicatesAreAmbiguous) {
  Capture c({kA, kB});
  auto dgram = [&](bool from0, long double t, uint32_t hash, uint16_t id) {
    cp_net_rec r = from0 ? c.rec(0, IPPROTO_UDP, "10.0.0.1", 4000, "10.0.0.2", 53)
                         : c.rec(0, IPPROTO_UDP, "10.0.0.2", 53, "10.0.0.1", 4000);
    r.len = 64, r.hash = hash, r.ip_id = id;
    r.kind = CP_NET_PKT_TX;
    c.put(from0 ? 0 : 1, t, r);
    r.kind = CP_NET_PKT_RX;
    c.put(from0 ? 1 : 0, t + 70, r);
  };
  dgram(true, 100, 0xabc, 1);
  dgram(true, 200, 0xabc, 2);  // same payload, other IPv4 id: distinct
  dgram(false, 300, 0xdef, 9);
  dgram(true, 400, 0x123, 3);
  dgram(true, 500, 0x123, 3);  // identical datagram twice: both receives ambiguous
  PacketMatches m = match_packets(c.nodes);
  EXPECT_EQ(m.total.rx, 5u);
  EXPECT_EQ(m.total.matched, 3u);
  EXPECT_EQ(m.total.ambiguous, 2u);
  EXPECT_EQ(m.counts(0, 1), (std::pair<size_t, size_t>{2, 1}));
  EXPECT_EQ(m.counts(1, 0), (std::pair<size_t, size_t>{1, 2}));
  expect_true(c, 0, 1, m.constraints(0, 1));
  expect_true(c, 1, 0, m.constraints(1, 0));
}

TEST(PacketPairs, FlowTransmittedByTwoNodesIsAmbiguousAndLossySendersAreNotUsed) {
  // Node 2 forwards node 0's connection and records it too: which node's transmit a
  // receive on node 1 belongs to is not guessed.
  Capture c({kA, kB, {3e12L, 2.5L}});
  c.handshake(10, 20);
  c.put(2, 20, c.seg(CP_NET_PKT_TX, true, 10, 0, 0x02));
  c.tcp(true, 100, 30, 11, 100);
  c.put(2, 110, c.seg(CP_NET_PKT_TX, true, 11, 100));
  PacketMatches m = match_packets(c.nodes);
  EXPECT_EQ(m.total.ambiguous, 1u);
  EXPECT_EQ(m.total.matched, 0u);

  Capture d({kA, kB});
  d.handshake(10, 20);
  d.tcp(true, 100, 30, 11, 100);
  d.tcp(false, 200, 30, 21, 100);
  d.nodes[0].complete = false;  // node 0's capture dropped records
  PacketMatches n = match_packets(d.nodes);
  EXPECT_EQ(n.total.lossy_sender, 1u);
  EXPECT_EQ(n.counts(0, 1), (std::pair<size_t, size_t>{0, 1}));
}

TEST(PacketPairs, ManyPacketsBothWaysAllConstraintsHold) {
  Capture c({kA, kB});
  c.handshake(123456, 654321);
  uint32_t s0 = 123457, s1 = 654322;
  for (int i = 0; i < 2000; ++i) {
    long double t = 1000 + 97.0L * i;
    c.tcp(true, t, 25 + (i % 7) * 3, s0, 1448), s0 += 1448;
    if (i % 3 == 0) c.tcp(false, t + 5, 31 + (i % 5), s1, 200), s1 += 200;
    if (i % 50 == 0) c.tcp(true, t + 50, 25, s0 - 1448, 1448);  // spurious retransmission
  }
  PacketMatches m = match_packets(c.nodes);
  EXPECT_EQ(m.total.ambiguous + m.total.unmatched + m.total.no_handshake, 0u);
  auto [ab, ba] = m.counts(0, 1);
  EXPECT_EQ(ab, 2000u + 40u);
  EXPECT_EQ(ba, 667u);
  expect_true(c, 0, 1, m.constraints(0, 1));
}

}  // namespace
}  // namespace cptrace
