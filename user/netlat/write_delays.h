// The application's view of TCP: for every write (a send call that handed bytes
// to a socket), the time from the entry of that call on the sender to the
// return of the recv call on the receiver that delivered its last byte (the
// kernel's stamp as the bytes were copied out: sock_recv_length), on the
// reference clock with a strict bound.
//
// Why the call's entry: the send event is stamped as the call leaves the
// socket layer, after its bytes may already be on the wire, so it is not a
// lower bound on anything the receiver sees (docs/net.md). The recorder stamps
// the entry of write/writev/send* (CP_NETF_CALL_START); sends by other means
// (sendfile, splice, io_uring) carry none and are counted, not measured.
//
// Which recv delivered a byte follows from the stream positions alone: both
// socket events carry the sequence number of their first byte (TCP keeps the
// stream in order), so no guess is made. UDP messages have no such position on
// the receiving socket: they are matched by their bytes (message_delays.h).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "netlat/flow_stats.h"
#include "netlat/packet_delays.h"
#include "translate/translate_nodes.h"

namespace cptrace {

// One node's socket events in stamp order: TCP sends (with or without a call
// start) and recvs; UDP sends and recvs. And the node's packets as read for the
// clocks (NodePackets::events, any order): the UDP ones it received tell, by
// their payload hashes, a datagram from another flow apart.
struct SocketEvents {
  std::vector<NetEvent> sends, recvs;
  std::vector<NetEvent> udp_sends, udp_recvs;
  std::span<const NetEvent> packets;
};
// Keeps e when it is a TCP or UDP socket's send or recv of some bytes (the
// `other` events of read_net_events).
void add_socket_event(SocketEvents& s, const NetEvent& e);
// Once every event is added: each list in stamp order, `packets` pointed at the
// node's packets (which must outlive `s`).
void finish_socket_events(std::vector<SocketEvents>& s, const std::vector<NodePackets>& packets);

struct WriteDelay {
  uint32_t tx_node = 0, rx_node = 0;
  FlowId flow;  // as its data packets carry it: sender -> receiver
  const NetEvent* send = nullptr;  // call_ts: the call's entry
  const NetEvent* recv = nullptr;  // the recv that returned the write's last byte
  PacketDelays::Span span;
  // The send call's entry on the reference, ns since the reference's recording
  // start (netlat() fills it; INT64_MIN without a start): for plots over time.
  int64_t at_ns = INT64_MIN;
};

struct WriteCounts {
  uint64_t writes = 0;  // send events of the flow on the sender
  uint64_t no_start = 0;  // of them, without a call start (not measured)
  uint64_t undelivered = 0;  // with a start, but no recorded recv returned their last byte
  uint64_t unidentified = 0;  // UDP: with a start, but their bytes name no one message (message_delays.h)
};

// The writes of flow `f` from node tx to node rx, each passed to `each` once
// its recv is found.
WriteCounts match_writes(const FlowId& f, uint32_t tx, uint32_t rx, const std::vector<SocketEvents>& ev,
                         PacketDelays& bounds, const std::function<void(const WriteDelay&)>& each);

}  // namespace cptrace
