// The application's view of TCP writes: see write_delays.h.
#include "netlat/write_delays.h"

#include <algorithm>

#include <netinet/in.h>

namespace cptrace {
namespace {

// The data flow a receiving socket's event belongs to: its remote end sent.
FlowId reversed(const cp_net_rec& r) {
  FlowId f = FlowId::of(r);
  std::swap(f.saddr, f.daddr);
  std::swap(f.sport, f.dport);
  return f;
}

// Stream offsets of 32-bit sequence numbers, unwrapped in the order given,
// relative to `base` (the first within 2^31 of it).
struct Unwrap {
  uint32_t base, last = 0;
  int64_t at = 0;
  bool started = false;
  int64_t operator()(uint32_t seq) {
    at = started ? at + int32_t(seq - last) : int32_t(seq - base);
    last = seq, started = true;
    return at;
  }
};

}  // namespace

void add_socket_event(SocketEvents& s, const NetEvent& e) {
  if (e.r.len == 0) return;
  const bool tcp = e.r.proto == IPPROTO_TCP, udp = e.r.proto == IPPROTO_UDP;
  if (e.r.kind == CP_NET_SOCK_SEND && (tcp || udp)) (tcp ? s.sends : s.udp_sends).push_back(e);
  if (e.r.kind == CP_NET_SOCK_RECV && (tcp || udp)) (tcp ? s.recvs : s.udp_recvs).push_back(e);
}

void finish_socket_events(std::vector<SocketEvents>& s, const std::vector<NodePackets>& packets) {
  // Per-CPU rings: time order is the stamps'.
  auto by_ts = [](const NetEvent& a, const NetEvent& b) { return a.ts < b.ts; };
  for (size_t i = 0; i < s.size(); ++i) {
    for (auto* v : {&s[i].sends, &s[i].recvs, &s[i].udp_sends, &s[i].udp_recvs})
      std::stable_sort(v->begin(), v->end(), by_ts);
    if (i < packets.size()) s[i].packets = packets[i].events;
  }
}

WriteCounts match_writes(const FlowId& f, uint32_t tx, uint32_t rx, const std::vector<SocketEvents>& ev,
                         PacketDelays& bounds, const std::function<void(const WriteDelay&)>& each) {
  WriteCounts c;
  std::vector<const NetEvent*> recvs;
  for (const NetEvent& e : ev[rx].recvs)
    if (reversed(e.r) == f) recvs.push_back(&e);
  std::vector<int64_t> ends;  // each recv's stream offset after its last byte, in delivery order
  if (!recvs.empty()) {
    Unwrap u{recvs.front()->r.seq};
    for (const NetEvent* e : recvs) ends.push_back(u(e->r.seq) + e->r.len);
  }
  Unwrap sent{recvs.empty() ? 0 : recvs.front()->r.seq};
  for (const NetEvent& s : ev[tx].sends) {
    if (FlowId::of(s.r) != f) continue;
    c.writes++;
    const int64_t last = sent(s.r.seq) + s.r.len - 1;
    if (!(s.r.flags & CP_NETF_CALL_START)) {
      c.no_start++;
      continue;
    }
    // The first recv whose bytes reach past the last byte delivered it, if
    // its first byte is not past it (a recv the recorder missed would be).
    const auto it = std::upper_bound(ends.begin(), ends.end(), last);
    const size_t k = size_t(it - ends.begin());
    if (it == ends.end() || *it - recvs[k]->r.len > last) {
      c.undelivered++;
      continue;
    }
    WriteDelay d;
    d.tx_node = tx, d.rx_node = rx, d.flow = f, d.send = &s, d.recv = recvs[k];
    d.span = bounds.between(tx, s.call_ts, s.call_err, rx, recvs[k]->ts, recvs[k]->ts_err);
    each(d);
  }
  return c;
}

}  // namespace cptrace
