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

Bound PacketDelays::stamp(uint32_t node, const NetEvent& e) {
  return cursors_[node].at_stamp(e.ts, std::min(e.ts_err, kTranslateTscRange));
}

bool PacketDelays::in_transition(uint32_t node, const NetEvent& e) const {
  return stamp_in_ranges(transitions_[node], e.ts, e.ts_err);
}

PacketDelay PacketDelays::of(const PacketMatch& m) {
  PacketDelay d;
  d.tx_node = m.tx_node, d.rx_node = m.rx_node;
  d.tx = &nodes_[m.tx_node].events[m.tx];
  d.rx = &nodes_[m.rx_node].events[m.rx];
  const Bound t = stamp(m.tx_node, *d.tx), r = stamp(m.rx_node, *d.rx);
  d.ticks = {r.lo - t.hi, r.est - t.est, r.hi - t.lo};
  d.ticks.est = std::clamp(d.ticks.est, d.ticks.lo, d.ticks.hi);
  d.ns = ns_(d.ticks.est, d.ticks.lo, d.ticks.hi);
  d.guaranteed = !in_transition(m.tx_node, *d.tx) && !in_transition(m.rx_node, *d.rx);
  return d;
}

}  // namespace cptrace
