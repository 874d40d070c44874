// Packets grouped by flow and direction: what each node sent and received of a
// flow (data packets; TCP retransmissions on the sender, out-of-order arrivals
// on the receiver), and for each sender -> receiver pair of nodes the bounded
// one-way delays of its matched packets, summarised as percentiles with bounds.
//
// A flow is one direction of a connection or datagram stream: protocol,
// addresses and ports, source to destination as the packets carry them.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/percentiles.h"
#include "netlat/packet_delays.h"

namespace cptrace {

struct FlowId {
  uint8_t proto = 0, family = 0;
  std::array<uint8_t, 16> saddr{}, daddr{};
  uint16_t sport = 0, dport = 0;
  static FlowId of(const cp_net_rec& r);
  std::string text() const;  // "udp 10.0.0.1:5000 -> 10.0.0.2:9000"
  std::string addr(bool src) const;  // the source's or destination's address as text
  auto operator<=>(const FlowId&) const = default;
};

// One node's view of a flow.
struct FlowSide {
  uint64_t tx = 0, retransmitted = 0;  // data packets transmitted; TCP: of bytes sent before
  uint64_t rx = 0, out_of_order = 0;  // data packets received; TCP: below bytes received before
};

// Sender -> receiver: the matched packets' delays (ns bounds), unguaranteed ones counted.
struct FlowLink {
  std::vector<NsBound> delays;
  uint64_t unguaranteed = 0;  // a stamp in a hull transition: no strict bound
  void add(const NsBound& d, bool guaranteed) { guaranteed ? delays.push_back(d) : void(unguaranteed++); }
};

struct DelaySummary {
  uint64_t count = 0;
  Percentiles<NsBound> p;  // per field: the estimate's, the lows' and the highs' order statistic
  int64_t width_p50 = 0;  // median bound width, ns
};
DelaySummary summarize(std::vector<NsBound> delays);

class FlowTable {
 public:
  // A node's data packets of every flow (len > 0, TCP or UDP) that `keep`
  // accepts: counted per side (retransmissions and order over all of them).
  void count_packets(uint32_t node, const NodePackets& p, const std::function<bool(const NetEvent&)>& keep);
  void add(const PacketDelay& d);
  const std::map<FlowId, std::map<uint32_t, FlowSide>>& sides() const { return sides_; }
  const std::map<std::pair<FlowId, std::pair<uint32_t, uint32_t>>, FlowLink>& links() const { return links_; }
  // Node's side of flow f (all zero where it saw none of it).
  FlowSide side(const FlowId& f, uint32_t node) const;

 private:
  std::map<FlowId, std::map<uint32_t, FlowSide>> sides_;  // flow -> node -> side
  std::map<std::pair<FlowId, std::pair<uint32_t, uint32_t>>, FlowLink> links_;  // (flow, (tx, rx node))
};

}  // namespace cptrace
