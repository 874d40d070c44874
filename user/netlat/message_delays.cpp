// The application's view of UDP datagrams: see message_delays.h.
#include "netlat/message_delays.h"

#include <algorithm>
#include <unordered_map>

#include <netinet/in.h>

namespace cptrace {
namespace {

bool unspecified(const uint8_t* a) {
  return std::all_of(a, a + 16, [](uint8_t b) { return b == 0; });
}

bool same_addr(const uint8_t* a, const std::array<uint8_t, 16>& b) { return std::equal(b.begin(), b.end(), a); }

// A send of flow f: to f's destination (as the call or the connected socket
// named it), from f's port, on f's address or a socket bound to any.
bool sends_on(const cp_net_rec& r, const FlowId& f) {
  return r.family == f.family && r.sport == f.sport && r.dport == f.dport && same_addr(r.daddr, f.daddr) &&
         (same_addr(r.saddr, f.saddr) || unspecified(r.saddr));
}

// A send to f's destination from anywhere: another sender's copy of a payload.
bool sends_to(const cp_net_rec& r, const FlowId& f) {
  return r.family == f.family && r.dport == f.dport && same_addr(r.daddr, f.daddr);
}

// A recv on f's receiving socket: f's port and address (or any), connected to
// f's source or to nothing (the datagram's source is not in the event).
bool receives_on(const cp_net_rec& r, const FlowId& f) {
  const bool remote_ok = (r.dport == f.sport && same_addr(r.daddr, f.saddr)) || (r.dport == 0 && unspecified(r.daddr));
  return r.family == f.family && r.sport == f.dport && (same_addr(r.saddr, f.daddr) || unspecified(r.saddr)) &&
         remote_ok;
}

}  // namespace

WriteCounts match_messages(const FlowId& f, uint32_t tx, uint32_t rx, const std::vector<SocketEvents>& ev,
                           PacketDelays& bounds, const std::function<void(const WriteDelay&)>& each) {
  std::unordered_map<uint32_t, uint32_t> sent;  // hash -> sends to f's destination, every node
  for (const SocketEvents& n : ev)
    for (const NetEvent& s : n.udp_sends)
      if ((s.r.flags & CP_NETF_MSG_HASH) && sends_to(s.r, f)) sent[s.r.hash]++;
  std::unordered_map<uint32_t, const NetEvent*> recv;  // hash -> its one recv (nullptr: more than one)
  for (const NetEvent& r : ev[rx].udp_recvs)
    if ((r.r.flags & CP_NETF_MSG_HASH) && receives_on(r.r, f)) {
      auto [it, fresh] = recv.emplace(r.r.hash, &r);
      if (!fresh) it->second = nullptr;
    }
  std::unordered_map<uint32_t, uint32_t> foreign;  // hash -> packets received from another flow
  for (const NetEvent& p : ev[rx].packets)
    if (p.r.kind == CP_NET_PKT_RX && p.r.proto == IPPROTO_UDP && p.r.len != 0 && sends_to(p.r, f) &&
        !(FlowId::of(p.r) == f))
      foreign[p.r.hash]++;

  WriteCounts c;
  for (const NetEvent& s : ev[tx].udp_sends) {
    if (!sends_on(s.r, f)) continue;
    c.writes++;
    if (!(s.r.flags & CP_NETF_CALL_START)) {
      c.no_start++;
      continue;
    }
    const uint32_t h = s.r.hash;
    const auto it = recv.find(h);
    if (!(s.r.flags & CP_NETF_MSG_HASH) || sent[h] != 1 || foreign.count(h) || (it != recv.end() && !it->second)) {
      c.unidentified++;
      continue;
    }
    if (it == recv.end()) {
      c.undelivered++;
      continue;
    }
    WriteDelay d;
    d.tx_node = tx, d.rx_node = rx, d.flow = f, d.send = &s, d.recv = it->second;
    d.span = bounds.between(tx, s.call_ts, s.call_err, rx, d.recv->ts, d.recv->ts_err);
    each(d);
  }
  return c;
}

}  // namespace cptrace
