// One matched packet's bounded delay: see packet_delays.h.
#include "netlat/packet_delays.h"

#include <algorithm>

namespace cptrace {

PacketDelays::PacketDelays(const std::vector<NodePackets>& nodes, std::vector<const Relation*> to_ref,
                           std::vector<Ranges> transitions, const TicksToNs& ns)
    : nodes_(nodes), transitions_(std::move(transitions)), ns_(ns) {
  cursors_.reserve(to_ref.size());
  for (const Relation* r : to_ref) cursors_.emplace_back(*r);
}

Bound PacketDelays::stamp(uint32_t node, uint64_t ts, uint64_t err) {
  return cursors_[node].at_stamp(ts, std::min(err, kTranslateTscRange));
}

bool PacketDelays::in_transition(uint32_t node, uint64_t ts, uint64_t err) const {
  return stamp_in_ranges(transitions_[node], ts, err);
}

PacketDelays::Span PacketDelays::between(uint32_t from_node, uint64_t from_ts, uint64_t from_err, uint32_t to_node,
                                         uint64_t to_ts, uint64_t to_err) {
  Span s;
  const Bound t = stamp(from_node, from_ts, from_err), r = stamp(to_node, to_ts, to_err);
  s.ticks = {r.lo - t.hi, r.est - t.est, r.hi - t.lo};
  s.ticks.est = std::clamp(s.ticks.est, s.ticks.lo, s.ticks.hi);
  s.ns = ns_(s.ticks.est, s.ticks.lo, s.ticks.hi);
  s.guaranteed = !in_transition(from_node, from_ts, from_err) && !in_transition(to_node, to_ts, to_err);
  s.from = t;
  return s;
}

PacketDelay PacketDelays::of(const PacketMatch& m) {
  PacketDelay d;
  d.tx_node = m.tx_node, d.rx_node = m.rx_node;
  d.tx = &nodes_[m.tx_node].events[m.tx];
  d.rx = &nodes_[m.rx_node].events[m.rx];
  const Span s = between(m.tx_node, d.tx->ts, d.tx->ts_err, m.rx_node, d.rx->ts, d.rx->ts_err);
  d.ticks = s.ticks, d.ns = s.ns, d.guaranteed = s.guaranteed, d.tx_ref = s.from;
  return d;
}

}  // namespace cptrace
