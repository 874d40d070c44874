#include "netlat/flow_series.h"

#include <map>

#include "netlat/netlat_output.h"

namespace cptrace {

FlowReport flow_report(const NetlatOptions& o, const MemoryBudget& budget) {
  std::map<LinkKey, std::vector<LatencySample>> samples;
  NetlatResult res = netlat(o, [&](const NetlatResult&, const PacketDelay& d) {
    if (!d.guaranteed) return;
    LatencySample x;
    x.tuple = d.rx->r.seq;
    x.at_s = d.tx_at_ns == INT64_MIN ? 0 : double(d.tx_at_ns) * 1e-9;
    x.value_s = double(d.ns.ns) * 1e-9, x.lo_s = double(d.ns.lo) * 1e-9, x.hi_s = double(d.ns.hi) * 1e-9;
    samples[{FlowId::of(d.rx->r), {d.tx_node, d.rx_node}}].push_back(x);
  });
  FlowReport out;
  out.summary = netlat_json(res);
  for (const auto& [key, xs] : samples) {
    LatencySeries s;
    // "udp 10.0.0.1:5000 -> 10.0.0.2:9000": the sender's end and the receiver's,
    // so that the page's "FROM -> TO" label reads as the flow.
    const std::string text = key.first.text();
    const size_t arrow = text.find(" -> ");
    s.from_channel = text.substr(0, arrow);
    s.to_channel = arrow == std::string::npos ? "" : text.substr(arrow + 4);
    s.from_node = res.nodes[key.second.first], s.to_node = res.nodes[key.second.second];
    s.remote = true;
    s.method = "one-way delay, transmit -> receive";
    fill_series_stats(
        s,
        [&](const std::function<void(const LatencySample&)>& fn) {
          for (const LatencySample& x : xs) fn(x);
        },
        budget);
    out.series.push_back(std::move(s));
  }
  return out;
}

}  // namespace cptrace
