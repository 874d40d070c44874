// Packets captured by `record --net` on several nodes, matched transmit -> receive
// into one-way causality constraints (docs/net.md, "Matching key"): a packet
// transmitted by node S at s (S's clock) and received by node R at r (R's clock)
// says that the true map from S's clock to R's passes on or below (s, r).
//
// Matching rules (strict: a constraint is produced only when it is certainly true):
// - `tx` on the sender and `rx` on the receiver (closest to the wire); socket
//   events are not causal (docs/net.md) and are ignored.
// - TCP, per connection = (family, addresses, ports, ISN). A connection is used
//   only when its SYN (or SYN-ACK) transmit is in the sender's trace and its
//   receive in the receiver's, so that the ISN anchors the byte numbering on both
//   sides and no data can have been sent before the sender's capture began (a
//   retransmission of such data would look like a first transmission). Sequence
//   numbers are unwrapped to 64-bit stream offsets from the ISN. On the sender,
//   the first transmission of every byte is kept (retransmissions and GSO super-
//   packets by byte range; bytes beyond a gap left by a lost record are unknown).
//   A receive covering bytes [o, o + len) is later than the first transmission of
//   its first and of its last byte; the later of the two known ones is its
//   constraint. (GRO-merged receives and TSO-split transmits match the same way.)
// - UDP, key (family, addresses, ports, len, payload hash, IPv4 id): a receive
//   matches when exactly one transmit with its key exists across all traces.
// - Ambiguous (never guessed, counted): a UDP key transmitted more than once, a
//   TCP connection whose SYN was transmitted on more than one node (a forwarding
//   node that records too, or a reused 4-tuple and ISN).
// Packets sent and received on the same node give no constraint.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/net_codec.h"
#include "translate/sync_pairs.h"

namespace cptrace {

struct PacketMatchStats {
  uint64_t rx = 0;  // data-carrying receives considered (TCP len > 0, UDP)
  uint64_t matched = 0;  // receives turned into a constraint
  uint64_t ambiguous = 0;  // receives whose transmit is not uniquely identified
  uint64_t unmatched = 0;  // receives with no known transmit on another node
  uint64_t no_handshake = 0;  // TCP receives of connections whose SYN is missing on a side
  uint64_t same_node = 0;  // transmitted and received on the same node
  uint64_t lossy_sender = 0;  // transmitted by a node whose capture dropped records
  nlohmann::json to_json() const;
  PacketMatchStats& operator+=(const PacketMatchStats& o);
};

// Matched packets between nodes a < b (indices into the input vector).
struct PacketLink {
  std::vector<Pt> a_to_b;  // (transmit on a, receive on b)
  std::vector<Pt> b_to_a;  // (receive on a, transmit on b): x on a's clock as well
};

// One matched packet: the indices of its transmit and of its receive in their
// nodes' NodePackets::events (for `netlat`, which bounds each one-way delay).
struct PacketMatch {
  uint32_t tx_node = 0, rx_node = 0;
  size_t tx = 0, rx = 0;
};

struct PacketMatches {
  std::map<std::pair<size_t, size_t>, PacketLink> links;  // key (a, b), a < b
  PacketMatchStats total;
  // Causality constraints on the relation from -> to (x on from's clock), sorted by x.
  Constraints constraints(size_t from, size_t to) const;
  // Matched packets each way for the ordered pair.
  std::pair<size_t, size_t> counts(size_t from, size_t to) const;
  const PacketLink* link(size_t from, size_t to) const;
};

struct NodePackets {
  std::vector<NetEvent> events;  // any kinds, any order; ts on the node's clock
  // False when the node's capture dropped records (Counters "net" dropped > 0): a
  // lost transmit record could make a retransmission, or a second identical UDP
  // datagram, look like the first transmission, so its transmits are not used.
  bool complete = true;
};

// A stamp moved to the end of its interval that keeps causality true: a
// transmit to its earliest instant (ts - ts_err), a receive to its latest (ts +
// ts_err). Causality holds for the true instants; with each stamp an interval,
// the constraint that holds is "received no later than the latest possible
// receive, sent no earlier than the earliest possible send".
uint64_t causal_ts(const NetEvent& e);

// The packets' matches, with constraints on causal stamps (causal_ts): the
// events stay as recorded, so a caller bounds delays from the same vector.
// `pairs`, when given, receives every match (in no particular order).
PacketMatches match_packets(const std::vector<NodePackets>& nodes, std::vector<PacketMatch>* pairs = nullptr);

}  // namespace cptrace
