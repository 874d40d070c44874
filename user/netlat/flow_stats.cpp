// Packets grouped by flow: see flow_stats.h.
#include "netlat/flow_stats.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <netinet/in.h>

#include "tables/rank_select.h"
#include "trace/net_codec.h"

namespace cptrace {

FlowId FlowId::of(const cp_net_rec& r) {
  FlowId f;
  f.proto = r.proto, f.family = r.family;
  std::memcpy(f.saddr.data(), r.saddr, 16);
  std::memcpy(f.daddr.data(), r.daddr, 16);
  f.sport = r.sport, f.dport = r.dport;
  return f;
}

std::string FlowId::addr(bool src) const {
  cp_net_rec r{};
  r.family = family;
  std::memcpy(r.saddr, saddr.data(), 16);
  std::memcpy(r.daddr, daddr.data(), 16);
  return net_addr(r, src);
}

std::string FlowId::text() const {
  auto end = [&](bool src, uint16_t port) {
    std::string a = addr(src);
    return family == AF_INET6 ? fmt::format("[{}]:{}", a, port) : fmt::format("{}:{}", a, port);
  };
  return fmt::format("{} {} -> {}", net_proto_name(proto), end(true, sport), end(false, dport));
}

namespace {

bool data_packet(const NetEvent& e) {
  return (e.r.kind == CP_NET_PKT_TX || e.r.kind == CP_NET_PKT_RX) && e.r.len > 0 &&
         (e.r.proto == IPPROTO_TCP || e.r.proto == IPPROTO_UDP);
}

// TCP: whether a segment starts below the highest byte seen before on its side
// (32-bit sequence space, compared modulo 2^32).
struct SeqFront {
  bool seen = false;
  uint32_t hi = 0;
  bool behind(const cp_net_rec& r) {
    const uint32_t end = r.seq + r.len;
    const bool back = seen && int32_t(r.seq - hi) < 0;
    if (!seen || int32_t(end - hi) > 0) hi = end;
    seen = true;
    return back;
  }
};

}  // namespace

void FlowTable::count_packets(uint32_t node, const NodePackets& p, const std::function<bool(const NetEvent&)>& keep) {
  std::vector<const NetEvent*> evs;
  for (const NetEvent& e : p.events)
    if (data_packet(e)) evs.push_back(&e);
  // The recorder writes per-CPU rings: time order is the stamps'.
  std::stable_sort(evs.begin(), evs.end(), [](const NetEvent* a, const NetEvent* b) { return a->ts < b->ts; });
  std::map<std::pair<FlowId, bool>, SeqFront> fronts;
  for (const NetEvent* e : evs) {
    const FlowId f = FlowId::of(e->r);
    const bool tx = e->r.kind == CP_NET_PKT_TX;
    const bool behind = e->r.proto == IPPROTO_TCP && fronts[{f, tx}].behind(e->r);
    if (!keep(*e)) continue;
    FlowSide& s = sides_[f][node];
    if (tx)
      s.tx++, s.retransmitted += behind;
    else
      s.rx++, s.out_of_order += behind;
  }
}

FlowSide FlowTable::side(const FlowId& f, uint32_t node) const {
  const auto it = sides_.find(f);
  if (it == sides_.end()) return {};
  const auto s = it->second.find(node);
  return s == it->second.end() ? FlowSide{} : s->second;
}

void FlowTable::add(const PacketDelay& d) {
  links_[{FlowId::of(d.rx->r), {d.tx_node, d.rx_node}}].add(d.ns, d.guaranteed);
}

DelaySummary summarize(std::vector<NsBound> v) {
  DelaySummary s;
  s.count = v.size();
  if (v.empty()) return s;
  // Each delay's truth lies in its [lo, hi], so the k-th smallest truth lies
  // between the k-th smallest lo and the k-th smallest hi.
  auto column = [&](int64_t NsBound::*m) {
    std::vector<int64_t> c;
    c.reserve(v.size());
    for (const NsBound& b : v) c.push_back(b.*m);
    std::sort(c.begin(), c.end());
    return c;
  };
  const std::vector<int64_t> est = column(&NsBound::ns), lo = column(&NsBound::lo), hi = column(&NsBound::hi);
  for (auto f : all_percentiles<NsBound>()) {
    const uint64_t k = nearest_rank_index(v.size(), Percentiles<NsBound>::fraction(f));
    s.p.*f = {est[k], lo[k], hi[k]};
  }
  std::vector<int64_t> w;
  w.reserve(v.size());
  for (const NsBound& b : v) w.push_back(b.hi - b.lo);
  std::nth_element(w.begin(), w.begin() + w.size() / 2, w.end());
  s.width_p50 = w[w.size() / 2];
  return s;
}

}  // namespace cptrace
