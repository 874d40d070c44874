#include "analyze/run_flows.h"

#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "latency/ticks_to_ns.h"
#include "netlat/flow_stats.h"
#include "netlat/packet_delays.h"
#include "tables/rank_select.h"
#include "trace/trace_reader.h"
#include "translate/translate_nodes.h"

namespace cptrace {
namespace {

// One flow and direction's bounded delays, in reference ticks.
struct Link {
  std::vector<int64_t> est, lo, hi;
  uint64_t matched = 0, unbounded = 0, unrelated = 0, failed = 0;
};

// Every node's transmits and receives as its trace stands (read_node_packets,
// as netlat reads them); a node whose trace is not readable yet has none.
std::vector<NodePackets> read_packets(const std::vector<FlowNode>& nodes, std::vector<std::string>& problems) {
  std::vector<NodePackets> raw(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    try {
      TraceReader r(nodes[i].dir);
      if (r.error()) throw std::runtime_error(r.error()->what());
      if (r.net_event_count() == 0) continue;
      raw[i] = read_node_packets(r);
    } catch (const std::exception& e) {
      raw[i] = NodePackets{};
      problems.push_back(fmt::format("{}: packets not read yet ({})", nodes[i].name, e.what()));
    }
  }
  return raw;
}

nlohmann::json link_json(const FlowId& flow, const std::string& from, const std::string& to, Link& l,
                         const std::optional<TscFrequency>& f) {
  nlohmann::json j = {{"flow", flow.text()},      {"from", from},          {"to", to},
                      {"matched", l.matched},     {"count", l.est.size()}, {"unbounded", l.unbounded},
                      {"unrelated", l.unrelated}, {"failed", l.failed},    {"unit", "ticks"}};
  add_bounded_percentiles(j, l.est, l.lo, l.hi, f);
  return j;
}

}  // namespace

void add_bounded_percentiles(nlohmann::json& j, std::vector<int64_t>& est, std::vector<int64_t>& lo,
                             std::vector<int64_t>& hi, const std::optional<TscFrequency>& f) {
  if (est.empty()) return;
  for (auto [key, q] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1.0}}) {
    // The k-th smallest true value lies between the k-th smallest lo and hi.
    const int64_t e = nearest_rank_select(est, q), l = nearest_rank_select(lo, q), h = nearest_rank_select(hi, q);
    nlohmann::json v = {{"ticks", e}, {"ticks_lo", l}, {"ticks_hi", h}};
    if (f) {
      const NsBound ns = ticks_to_ns(e, l, h, f->hz, f->lo, f->hi);
      v["ns"] = ns.ns, v["ns_lo"] = ns.lo, v["ns_hi"] = ns.hi;
    }
    j[key] = v;
  }
}

nlohmann::json run_flows(const std::vector<FlowNode>& nodes, const std::optional<TscFrequency>& f,
                         std::vector<std::string>& problems) {
  const std::vector<NodePackets> raw = read_packets(nodes, problems);
  std::vector<PacketMatch> matches;
  match_packets(raw, &matches);
  // Nodes without a relation yet get a stand-in: their packets are counted, not bounded.
  static const IdentityRelation none;
  std::vector<const Relation*> to_ref;
  for (const FlowNode& n : nodes) to_ref.push_back(n.to_ref ? n.to_ref : &none);
  // The drift-bounded relations have no hull transitions: every bound is strict.
  PacketDelays delays(raw, to_ref, std::vector<Ranges>(nodes.size()),
                      f ? TicksToNs(f->hz, f->lo, f->hi) : TicksToNs(1e9, 1e9, 1e9));
  std::map<std::pair<FlowId, std::pair<uint32_t, uint32_t>>, Link> links;
  for (const PacketMatch& m : matches) {
    const FlowId flow = FlowId::of(raw[m.rx_node].events[m.rx].r);
    Link& l = links[{flow, {m.tx_node, m.rx_node}}];
    l.matched++;
    if (!nodes[m.tx_node].to_ref || !nodes[m.rx_node].to_ref) {
      l.unrelated++;
      continue;
    }
    try {
      const PacketDelay d = delays.of(m);
      if (!d.guaranteed) {
        l.unbounded++;
        continue;
      }
      l.est.push_back(d.ticks.est), l.lo.push_back(d.ticks.lo), l.hi.push_back(d.ticks.hi);
    } catch (const std::exception& e) {
      if (l.failed++ == 0) problems.push_back(fmt::format("flow {}: {}", flow.text(), e.what()));
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [k, l] : links)
    out.push_back(link_json(k.first, nodes[k.second.first].name, nodes[k.second.second].name, l, f));
  return out;
}

}  // namespace cptrace
