// One matched packet's one-way delay on the reference clock, with its strict
// bound: each stamp of the pair is bounded on the reference by its node's
// relation (RelationCursor::at_stamp, widened by the stamp's own error), and
// the delay lies between the earliest receive minus the latest transmit and
// the latest receive minus the earliest transmit.
#pragma once
#include <cstdint>
#include <vector>

#include "latency/ticks_to_ns.h"
#include "translate/frame_rewrite.h"  // Ranges
#include "translate/packet_pairs.h"
#include "translate/relation_cursor.h"

namespace cptrace {

struct PacketDelay {
  uint32_t tx_node = 0, rx_node = 0;
  const NetEvent* tx = nullptr;  // as recorded: ts on its node's clock, ts_err
  const NetEvent* rx = nullptr;
  Bound ticks;  // reference ticks: est, lo, hi
  NsBound ns;
  Bound tx_ref;  // the transmit's stamp on the reference, ticks
  // tx_ref's estimate in ns since the reference's recording start (netlat()
  // fills it; INT64_MIN when the reference's meta.json has no start): for
  // plots over time, not a bound.
  int64_t tx_at_ns = INT64_MIN;
  // A stamp lies where its node's first hop to the reference changes rate
  // (hull transition): the bound is not guaranteed, so it is counted, not used.
  bool guaranteed = true;
};

// Bounds pairs of the nodes' packets on the reference; one cursor per node, so
// call in roughly increasing stamp order per node for speed (any order is exact).
class PacketDelays {
 public:
  PacketDelays(const std::vector<NodePackets>& nodes, std::vector<const Relation*> to_ref,
               std::vector<Ranges> transitions, const TicksToNs& ns);
  PacketDelay of(const PacketMatch& m);

  // Any two stamps of the nodes, the first before the second: the interval
  // between them on the reference in ticks and ns, and whether it is guaranteed.
  struct Span {
    Bound ticks;
    NsBound ns;
    bool guaranteed = true;
    Bound from;  // the first stamp on the reference
  };
  Span between(uint32_t from_node, uint64_t from_ts, uint64_t from_err, uint32_t to_node, uint64_t to_ts,
               uint64_t to_err);

 private:
  Bound stamp(uint32_t node, uint64_t ts, uint64_t err);
  bool in_transition(uint32_t node, uint64_t ts, uint64_t err) const;

  const std::vector<NodePackets>& nodes_;
  std::vector<RelationCursor> cursors_;
  std::vector<Ranges> transitions_;
  TicksToNs ns_;
};

}  // namespace cptrace
