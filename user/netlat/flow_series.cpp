#include "netlat/flow_series.h"

#include <map>

#include "netlat/netlat_output.h"

namespace cptrace {
namespace {

using Samples = std::map<LinkKey, std::vector<LatencySample>>;

LatencySample sample(uint64_t tuple, int64_t at_ns, const NsBound& ns) {
  LatencySample x;
  x.tuple = tuple;
  x.at_s = at_ns == INT64_MIN ? 0 : double(at_ns) * 1e-9;
  x.value_s = double(ns.ns) * 1e-9, x.lo_s = double(ns.lo) * 1e-9, x.hi_s = double(ns.hi) * 1e-9;
  return x;
}

// One series per flow and direction, labelled "udp 10.0.0.1:5000" -> "10.0.0.2:9000":
// the sender's end and the receiver's, so that the page's "FROM -> TO" label
// reads as the flow.
std::vector<LatencySeries> series_of(const Samples& samples, const NetlatResult& res, const char* method,
                                     const MemoryBudget& budget) {
  std::vector<LatencySeries> out;
  for (const auto& [key, xs] : samples) {
    LatencySeries s;
    const std::string text = key.first.text();
    const size_t arrow = text.find(" -> ");
    s.from_channel = text.substr(0, arrow);
    s.to_channel = arrow == std::string::npos ? "" : text.substr(arrow + 4);
    s.from_node = res.nodes[key.second.first], s.to_node = res.nodes[key.second.second];
    s.remote = true;
    s.method = method;
    fill_series_stats(
        s,
        [&](const std::function<void(const LatencySample&)>& fn) {
          for (const LatencySample& x : xs) fn(x);
        },
        budget);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

FlowReport flow_report(const NetlatOptions& o, const MemoryBudget& budget) {
  Samples packets, writes;
  NetlatResult res = netlat(
      o,
      [&](const NetlatResult&, const PacketDelay& d) {
        if (d.guaranteed)
          packets[{FlowId::of(d.rx->r), {d.tx_node, d.rx_node}}].push_back(sample(d.rx->r.seq, d.tx_at_ns, d.ns));
      },
      [&](const NetlatResult&, const WriteDelay& d) {
        if (d.span.guaranteed)
          writes[{d.flow, {d.tx_node, d.rx_node}}].push_back(sample(d.send->r.seq, d.at_ns, d.span.ns));
      });
  FlowReport out;
  out.summary = netlat_json(res);
  out.series = series_of(packets, res, "one-way delay, transmit -> receive", budget);
  out.write_series = series_of(writes, res, "application's view, send call -> recv", budget);
  return out;
}

}  // namespace cptrace
