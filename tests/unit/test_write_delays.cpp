// netlat --writes (netlat/write_delays.h): which recv delivered a write's last
// byte follows from the stream positions (across the 2^32 wrap), never from
// timing; writes without a call start or without a recorded recv are counted,
// and the delay runs from the call's entry to that recv's stamp.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "netlat/write_delays.h"

namespace cptrace {
namespace {

NetEvent sock(uint64_t ts, uint8_t kind, uint32_t seq, uint32_t len, bool sender) {
  NetEvent e;
  e.ts = ts;
  e.r.kind = kind, e.r.proto = IPPROTO_TCP, e.r.family = AF_INET, e.r.seq = seq, e.r.len = len;
  // A socket event's saddr is its own end: the sender's flow is 10.0.0.1:5000 -> 10.0.0.2:80.
  inet_pton(AF_INET, sender ? "10.0.0.1" : "10.0.0.2", e.r.saddr);
  inet_pton(AF_INET, sender ? "10.0.0.2" : "10.0.0.1", e.r.daddr);
  e.r.sport = sender ? 5000 : 80, e.r.dport = sender ? 80 : 5000;
  return e;
}

NetEvent write_call(uint64_t entry, uint64_t ts, uint32_t seq, uint32_t len) {
  NetEvent e = sock(ts, CP_NET_SOCK_SEND, seq, len, true);
  e.r.flags = CP_NETF_CALL_START;
  e.call_ts = entry;
  return e;
}

TEST(WriteDelays, TheRecvOfTheLastByteAcrossTheWrapFromTheCallsEntry) {
  std::vector<SocketEvents> ev(2);
  // Writes of 0x20, 0x30 and 0x10 bytes from 0xffffffe0 (the stream wraps in
  // the second), one by sendfile (no call start), one never read.
  ev[0].sends = {write_call(100, 110, 0xffffffe0u, 0x20), write_call(200, 210, 0x0u, 0x30),
                 sock(300, CP_NET_SOCK_SEND, 0x30u, 0x10, true), write_call(400, 410, 0x40u, 0x08)};
  // Reads of 0x18, 0x28, 0x20 bytes: the first write ends inside the second read.
  ev[1].recvs = {sock(1000, CP_NET_SOCK_RECV, 0xffffffe0u, 0x18, false),
                 sock(2000, CP_NET_SOCK_RECV, 0xfffffff8u, 0x28, false),
                 sock(3000, CP_NET_SOCK_RECV, 0x20u, 0x20, false)};
  IdentityRelation id;
  PacketDelays bounds({}, {&id, &id}, {{}, {}}, TicksToNs(1e9, 1e9, 1e9));
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (call start, recv stamp)
  const FlowId f = FlowId::of(ev[0].sends[0].r);
  const WriteCounts c = match_writes(f, 0, 1, ev, bounds, [&](const WriteDelay& d) {
    got.push_back({d.send->call_ts, d.recv->ts});
    EXPECT_EQ(d.span.ticks.lo, int64_t(d.recv->ts - d.send->call_ts));
    EXPECT_EQ(d.span.ticks.hi, int64_t(d.recv->ts - d.send->call_ts));
    EXPECT_TRUE(d.span.guaranteed);
  });
  EXPECT_EQ(c.writes, 4u);
  EXPECT_EQ(c.no_start, 1u);
  EXPECT_EQ(c.undelivered, 1u) << "bytes 0x40..0x47: no recorded recv reached them";
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (std::pair<uint64_t, uint64_t>{100, 2000})) << "last byte 0xffffffff: in the second read";
  EXPECT_EQ(got[1], (std::pair<uint64_t, uint64_t>{200, 3000})) << "last byte 0x2f: in the third read";
}

TEST(WriteDelays, ARecvMissingBeforeTheByteIsNotGuessed) {
  std::vector<SocketEvents> ev(2);
  ev[0].sends = {write_call(100, 110, 1000, 10)};
  // The recv of bytes 1000..1009 was not recorded; the next one starts past them.
  ev[1].recvs = {sock(500, CP_NET_SOCK_RECV, 990, 10, false), sock(900, CP_NET_SOCK_RECV, 1010, 10, false)};
  IdentityRelation id;
  PacketDelays bounds({}, {&id, &id}, {{}, {}}, TicksToNs(1e9, 1e9, 1e9));
  size_t n = 0;
  const WriteCounts c = match_writes(FlowId::of(ev[0].sends[0].r), 0, 1, ev, bounds, [&](const WriteDelay&) { n++; });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(c.undelivered, 1u);
}

}  // namespace
}  // namespace cptrace
