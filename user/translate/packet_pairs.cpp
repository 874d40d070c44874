// Transmit -> receive matching of captured packets across node traces.
#include "translate/packet_pairs.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include <netinet/in.h>

#include "translate/relation_cursor.h"

namespace cptrace {

uint64_t causal_ts(const NetEvent& e) {
  return e.r.kind == CP_NET_PKT_TX ? e.ts - std::min<uint64_t>(e.ts, e.ts_err)
                                   : e.ts + std::min(e.ts_err, kTranslateTscRange);
}

namespace {

constexpr uint8_t kSyn = 0x02;

// (family, saddr, daddr, sport, dport) plus, per use, ISN (TCP) or the UDP
// datagram's len/hash/ip_id: compared and hashed as raw bytes.
struct Key {
  uint8_t b[48] = {};
  bool operator==(const Key& o) const { return std::memcmp(b, o.b, sizeof b) == 0; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t c : k.b) h = (h ^ c) * 1099511628211ull;
    return size_t(h ^ (h >> 29));
  }
};

Key flow_key(const cp_net_rec& r, uint32_t a, uint32_t b, uint32_t c) {
  Key k;
  k.b[0] = r.family;
  k.b[1] = r.proto;
  std::memcpy(k.b + 2, r.saddr, 16);
  std::memcpy(k.b + 18, r.daddr, 16);
  std::memcpy(k.b + 34, &r.sport, 2);
  std::memcpy(k.b + 36, &r.dport, 2);
  std::memcpy(k.b + 38, &a, 4);
  std::memcpy(k.b + 42, &b, 4);
  uint16_t c16 = uint16_t(c);
  std::memcpy(k.b + 46, &c16, 2);
  return k;
}

bool usable(const NetEvent& e) {
  return (e.r.kind == CP_NET_PKT_TX || e.r.kind == CP_NET_PKT_RX) && !(e.r.flags & CP_NETF_L4_TRUNC) &&
         (e.r.proto == IPPROTO_TCP || e.r.proto == IPPROTO_UDP) &&
         causal_ts(e) <= uint64_t(std::numeric_limits<int64_t>::max() / 4);
}

// ---- TCP ------------------------------------------------------------------------------

// Byte offsets of one side of a connection, unwrapped from 32-bit sequence numbers:
// offset 0 is the byte after the ISN; a sequence number maps to the offset nearest
// the highest offset seen so far.
struct Unwrap {
  uint32_t isn = 0;
  int64_t ref = 0;
  int64_t offset(uint32_t seq, bool syn) {
    if (syn) return 0;  // data carried by a SYN (TCP Fast Open) starts at offset 0
    uint32_t rel = seq - isn - 1;
    int64_t off = ref + int32_t(rel - uint32_t(ref));
    return off;
  }
};

// First transmission of every byte on the sender: [start, end) sent first by e.
struct FirstTx {
  int64_t start, end;
  const NetEvent* e;
};

struct SenderConn {
  Unwrap u;
  int64_t hi = 0;  // bytes below were transmitted (or lie in a gap: unknown)
  std::vector<FirstTx> first;
  void transmit(int64_t off, int64_t len, const NetEvent* e) {
    int64_t end = off + len;
    if (off < 0 || end <= hi) return;  // a retransmission (or a byte of a gap): not a first transmission
    first.push_back({std::max(off, hi), end, e});
    hi = end;
    u.ref = std::max(u.ref, end);
  }
  // The first transmission of byte b, or null when unknown.
  const NetEvent* first_of(int64_t b) const {
    auto it = std::upper_bound(first.begin(), first.end(), b, [](int64_t v, const FirstTx& f) { return v < f.start; });
    if (it == first.begin()) return nullptr;
    --it;
    return b < it->end ? it->e : nullptr;
  }
};

struct PendingRx {
  size_t node;
  Key conn;
  int64_t first_byte, last_byte;
  const NetEvent* e;
};

struct TcpMatcher {
  // (flow, ISN) -> nodes that transmitted its SYN, and each such node's sender state.
  std::unordered_map<Key, std::vector<std::pair<size_t, SenderConn>>, KeyHash> conns;
  std::vector<PendingRx> pending;

  void scan(size_t node, const std::vector<const NetEvent*>& evs, PacketMatchStats& st) {
    std::unordered_map<Key, Key, KeyHash> tx_now, rx_now;  // flow -> current connection key
    std::unordered_map<Key, Unwrap, KeyHash> rx_unwrap;
    for (const NetEvent* e : evs) {
      const cp_net_rec& r = e->r;
      Key flow = flow_key(r, 0, 0, 0);
      bool syn = r.tcp_flags & kSyn;
      if (r.kind == CP_NET_PKT_TX) {
        if (syn) {
          Key c = flow_key(r, r.seq, 0, 0);
          tx_now[flow] = c;
          auto& v = conns[c];
          if (std::none_of(v.begin(), v.end(), [&](const auto& p) { return p.first == node; })) {
            v.push_back({node, SenderConn{}});
            v.back().second.u.isn = r.seq;
          }
        }
        if (r.len == 0) continue;
        auto it = tx_now.find(flow);
        if (it == tx_now.end()) continue;
        for (auto& [n, s] : conns[it->second])
          if (n == node) s.transmit(s.u.offset(r.seq, syn), r.len, e);
      } else {
        if (syn) {
          Key c = flow_key(r, r.seq, 0, 0);
          rx_now[flow] = c;
          rx_unwrap.try_emplace(c, Unwrap{r.seq, 0});  // a repeated SYN keeps the numbering
        }
        if (r.len == 0) continue;
        st.rx++;
        auto it = rx_now.find(flow);
        if (it == rx_now.end()) {
          st.no_handshake++;
          continue;
        }
        Unwrap& u = rx_unwrap[it->second];
        int64_t off = u.offset(r.seq, syn);
        if (off < 0) {
          st.unmatched++;
          continue;
        }
        u.ref = std::max(u.ref, off + int64_t(r.len));
        pending.push_back({node, it->second, off, off + int64_t(r.len) - 1, e});
      }
    }
  }
};

// ---- UDP ------------------------------------------------------------------------------

struct UdpTx {
  size_t node = 0;
  const NetEvent* e = nullptr;
  uint32_t count = 0;
};

Key udp_key(const cp_net_rec& r) { return flow_key(r, r.len, r.hash, r.ip_id); }

}  // namespace

nlohmann::json PacketMatchStats::to_json() const {
  return {{"receives", rx},
          {"matched", matched},
          {"ambiguous", ambiguous},
          {"unmatched", unmatched},
          {"no_handshake", no_handshake},
          {"same_node", same_node},
          {"lossy_sender", lossy_sender}};
}

PacketMatchStats& PacketMatchStats::operator+=(const PacketMatchStats& o) {
  rx += o.rx, matched += o.matched, ambiguous += o.ambiguous, unmatched += o.unmatched;
  no_handshake += o.no_handshake, same_node += o.same_node, lossy_sender += o.lossy_sender;
  return *this;
}

const PacketLink* PacketMatches::link(size_t from, size_t to) const {
  auto it = links.find({std::min(from, to), std::max(from, to)});
  return it == links.end() ? nullptr : &it->second;
}

Constraints PacketMatches::constraints(size_t from, size_t to) const {
  Constraints c;
  const PacketLink* l = link(from, to);
  if (!l) return c;
  if (from < to) {
    c.above = l->a_to_b;  // sent by from at x, received by to at y
    c.below = l->b_to_a;  // received by from at x, sent by to at y
  } else {
    for (const Pt& p : l->b_to_a) c.above.push_back({p.y, p.x});
    for (const Pt& p : l->a_to_b) c.below.push_back({p.y, p.x});
  }
  auto by_x = [](const Pt& a, const Pt& b) { return a.x != b.x ? a.x < b.x : a.y < b.y; };
  std::sort(c.above.begin(), c.above.end(), by_x);
  std::sort(c.below.begin(), c.below.end(), by_x);
  return c;
}

std::pair<size_t, size_t> PacketMatches::counts(size_t from, size_t to) const {
  const PacketLink* l = link(from, to);
  if (!l) return {0, 0};
  return from < to ? std::pair{l->a_to_b.size(), l->b_to_a.size()} : std::pair{l->b_to_a.size(), l->a_to_b.size()};
}

PacketMatches match_packets(const std::vector<NodePackets>& nodes, std::vector<PacketMatch>* pairs) {
  PacketMatches m;
  auto add = [&](size_t tx_node, const NetEvent* tx, size_t rx_node, const NetEvent* rx) {
    if (pairs)
      pairs->push_back({uint32_t(tx_node), uint32_t(rx_node), size_t(tx - nodes[tx_node].events.data()),
                        size_t(rx - nodes[rx_node].events.data())});
    const int64_t tx_ts = int64_t(causal_ts(*tx)), rx_ts = int64_t(causal_ts(*rx));
    size_t a = std::min(tx_node, rx_node), b = std::max(tx_node, rx_node);
    PacketLink& l = m.links[{a, b}];
    if (tx_node == a)
      l.a_to_b.push_back({tx_ts, rx_ts});
    else
      l.b_to_a.push_back({rx_ts, tx_ts});
    m.total.matched++;
  };

  // TCP: every node's events in time order (one clock per node).
  TcpMatcher tcp;
  std::unordered_map<Key, UdpTx, KeyHash> udp;
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::vector<const NetEvent*> evs;
    for (const NetEvent& e : nodes[n].events)
      if (usable(e) && e.r.proto == IPPROTO_TCP) evs.push_back(&e);
    std::stable_sort(evs.begin(), evs.end(),
                     [](const NetEvent* a, const NetEvent* b) { return causal_ts(*a) < causal_ts(*b); });
    tcp.scan(n, evs, m.total);
    for (const NetEvent& e : nodes[n].events)
      if (usable(e) && e.r.proto == IPPROTO_UDP && e.r.kind == CP_NET_PKT_TX) {
        UdpTx& t = udp[udp_key(e.r)];
        if (t.count == 0 || causal_ts(e) < causal_ts(*t.e)) t.e = &e;
        t.node = n;
        t.count++;
      }
  }
  for (const PendingRx& p : tcp.pending) {
    auto it = tcp.conns.find(p.conn);
    if (it == tcp.conns.end()) {
      m.total.no_handshake++;
      continue;
    }
    const auto& senders = it->second;
    if (senders.size() > 1) {
      m.total.ambiguous++;
      continue;
    }
    auto& [sn, s] = senders.front();
    if (sn == p.node) {
      m.total.same_node++;
      continue;
    }
    if (!nodes[sn].complete) {
      m.total.lossy_sender++;
      continue;
    }
    // The later of the two known first transmissions (ts order, the order of the scan).
    const NetEvent *f = s.first_of(p.first_byte), *l = s.first_of(p.last_byte);
    const NetEvent* t = !f ? l : !l ? f : (causal_ts(*l) >= causal_ts(*f) ? l : f);
    if (!t) {
      m.total.unmatched++;
      continue;
    }
    add(sn, t, p.node, p.e);
  }

  // UDP: a receive matches the one transmit of its key.
  for (size_t n = 0; n < nodes.size(); ++n)
    for (const NetEvent& e : nodes[n].events) {
      if (!usable(e) || e.r.proto != IPPROTO_UDP || e.r.kind != CP_NET_PKT_RX) continue;
      m.total.rx++;
      auto it = udp.find(udp_key(e.r));
      if (it == udp.end()) {
        m.total.unmatched++;
      } else if (it->second.count > 1) {
        m.total.ambiguous++;
      } else if (it->second.node == n) {
        m.total.same_node++;
      } else if (!nodes[it->second.node].complete) {
        m.total.lossy_sender++;
      } else {
        add(it->second.node, it->second.e, n, &e);
      }
    }
  return m;
}

}  // namespace cptrace
