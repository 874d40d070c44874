// netlat --writes for UDP (netlat/message_delays.h): a datagram's recv is the
// one carrying the same hash of its first bytes, whatever the order or the
// sockets' wildcard ends; where the hash names more than one message (a
// payload sent twice, sent to the same place by another node, received from
// another flow, or returned twice) nothing is guessed: the send is counted as
// unidentified, and sends without a call start or a recv are counted too.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "netlat/message_delays.h"

namespace cptrace {
namespace {

constexpr const char* kClient = "10.0.0.1";
constexpr const char* kServer = "10.0.0.2";

NetEvent event(uint64_t ts, uint8_t kind, const char* local, uint16_t lport, const char* remote, uint16_t rport,
               uint32_t hash) {
  NetEvent e;
  e.ts = ts;
  e.r.kind = kind, e.r.proto = IPPROTO_UDP, e.r.family = AF_INET, e.r.len = 100, e.r.hash = hash;
  if (local) inet_pton(AF_INET, local, e.r.saddr);
  if (remote) inet_pton(AF_INET, remote, e.r.daddr);
  e.r.sport = lport, e.r.dport = rport;
  return e;
}

// A send from the client's socket bound to any address, its destination named
// by the call, as the recorder writes it with --net-send-calls.
NetEvent send_call(uint64_t entry, uint32_t hash, uint16_t from_port = 5000) {
  NetEvent e = event(entry + 10, CP_NET_SOCK_SEND, nullptr, from_port, kServer, 9000, hash);
  e.r.flags = CP_NETF_CALL_START | CP_NETF_MSG_HASH;
  e.call_ts = entry;
  return e;
}

// A recv on the server's unconnected socket: no remote end.
NetEvent recv_call(uint64_t ts, uint32_t hash) {
  NetEvent e = event(ts, CP_NET_SOCK_RECV, kServer, 9000, nullptr, 0, hash);
  e.r.flags = CP_NETF_MSG_HASH;
  return e;
}

// A datagram received by the server, as its packet carries the flow.
NetEvent rx(uint64_t ts, uint32_t hash, uint16_t from_port = 5000) {
  NetEvent e = event(ts, CP_NET_PKT_RX, kClient, from_port, kServer, 9000, hash);
  return e;
}

FlowId flow() { return FlowId::of(rx(0, 0).r); }

struct Matched {
  WriteCounts counts;
  std::vector<std::pair<uint64_t, uint64_t>> pairs;  // (call entry, recv stamp)
};

Matched match(const std::vector<SocketEvents>& ev) {
  IdentityRelation id;
  PacketDelays bounds({}, {&id, &id, &id}, {{}, {}, {}}, TicksToNs(1e9, 1e9, 1e9));
  Matched r;
  r.counts = match_messages(flow(), 0, 1, ev, bounds, [&](const WriteDelay& d) {
    EXPECT_EQ(d.flow, flow());
    EXPECT_EQ(d.span.ticks.lo, int64_t(d.recv->ts - d.send->call_ts));
    EXPECT_TRUE(d.span.guaranteed);
    r.pairs.push_back({d.send->call_ts, d.recv->ts});
  });
  return r;
}

TEST(MessageDelays, EachRecvIsTheOneWithTheSameBytesWhateverTheOrder) {
  std::vector<SocketEvents> ev(3);
  NetEvent no_start = send_call(500, 55);
  no_start.r.flags = CP_NETF_MSG_HASH;  // sent by sendfile or io_uring: no entry stamped
  NetEvent unread = send_call(600, 66);
  unread.r.flags = CP_NETF_CALL_START;  // its buffer could not be read
  ev[0].udp_sends = {send_call(100, 11),      send_call(200, 22), send_call(300, 33), no_start, unread,
                     send_call(700, 77, 5001)};  // another flow of the client: not this one's
  // Delivered out of order; 33 never.
  ev[1].udp_recvs = {recv_call(2000, 22), recv_call(2100, 11), recv_call(2200, 55), recv_call(2300, 77)};
  const std::vector<NetEvent> packets = {rx(1900, 22), rx(1950, 11), rx(2150, 55), rx(2250, 77, 5001)};
  ev[1].packets = packets;
  const Matched r = match(ev);
  EXPECT_EQ(r.counts.writes, 5u);
  EXPECT_EQ(r.counts.no_start, 1u);
  EXPECT_EQ(r.counts.unidentified, 1u);
  EXPECT_EQ(r.counts.undelivered, 1u);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0], (std::pair<uint64_t, uint64_t>{100, 2100}));
  EXPECT_EQ(r.pairs[1], (std::pair<uint64_t, uint64_t>{200, 2000}));
}

TEST(MessageDelays, BytesThatNameMoreThanOneMessageAreNotGuessed) {
  std::vector<SocketEvents> ev(3);
  // 11 sent twice by this flow; 22 also sent to the server by another node;
  // 33 also received from another client; 44 returned twice; 99 alone.
  ev[0].udp_sends = {send_call(100, 11), send_call(150, 11), send_call(200, 22),
                     send_call(300, 33), send_call(400, 44), send_call(900, 99)};
  ev[2].udp_sends = {send_call(250, 22)};
  ev[1].udp_recvs = {recv_call(2000, 11), recv_call(2100, 22), recv_call(2200, 33), recv_call(2300, 33),
                     recv_call(2400, 44), recv_call(2450, 44), recv_call(2900, 99)};
  // A TCP packet to the port with the same first bytes is no other datagram.
  NetEvent tcp = rx(2160, 99, 6000);
  tcp.r.proto = IPPROTO_TCP;
  const std::vector<NetEvent> packets = {rx(2150, 33, 6000), tcp};
  ev[1].packets = packets;
  const Matched r = match(ev);
  EXPECT_EQ(r.counts.writes, 6u);
  EXPECT_EQ(r.counts.unidentified, 5u);
  EXPECT_EQ(r.counts.undelivered, 0u);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0], (std::pair<uint64_t, uint64_t>{900, 2900}));
}

TEST(MessageDelays, AConnectedServerSocketTakesOnlyItsPeersDatagrams) {
  std::vector<SocketEvents> ev(3);
  ev[0].udp_sends = {send_call(100, 11)};
  NetEvent elsewhere = recv_call(2000, 11);  // a socket connected to another client
  inet_pton(AF_INET, "10.0.0.9", elsewhere.r.daddr);
  elsewhere.r.dport = 5000;
  ev[1].udp_recvs = {elsewhere};
  Matched r = match(ev);
  EXPECT_EQ(r.counts.undelivered, 1u);
  EXPECT_TRUE(r.pairs.empty());
  NetEvent mine = recv_call(2100, 11);  // connected to this client
  inet_pton(AF_INET, kClient, mine.r.daddr);
  mine.r.dport = 5000;
  ev[1].udp_recvs = {mine};
  r = match(ev);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].second, 2100u);
}

}  // namespace
}  // namespace cptrace
