// cptrace netlat: the stages in order (netlat.h).
#include "netlat/netlat.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "netlat/message_delays.h"
#include "tables/memory_budget.h"
#include "translate/relation_cursor.h"
#include "translate/run_relations.h"
#include "translate/translated_meta.h"
#include "translate/unauthenticated_rounds.h"
#include "os/say.h"

namespace cptrace {
namespace {

constexpr size_t kAny = SIZE_MAX;

// The index of the node `name` (kAny for ""), or an error naming the flag.
size_t node_named(const std::vector<TranslateNode>& nodes, const std::string& name, const char* flag) {
  if (name.empty()) return kAny;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return i;
  std::string have;
  for (const TranslateNode& n : nodes) have += (have.empty() ? "" : ", ") + n.name;
  throw std::runtime_error(std::string(flag) + " " + name + ": no such node (the traces hold " + have + ")");
}

// --addr: the 16 bytes a record holds for it (IPv4 in the first 4), its family.
std::pair<std::array<uint8_t, 16>, uint8_t> parse_addr(const std::string& text) {
  std::array<uint8_t, 16> a{};
  if (inet_pton(AF_INET, text.c_str(), a.data()) == 1) return {a, AF_INET};
  if (inet_pton(AF_INET6, text.c_str(), a.data()) == 1) return {a, AF_INET6};
  throw std::runtime_error("--addr " + text + ": not an IPv4 or IPv6 address");
}

// The reference's TSC frequency interval, as translate measures it for seconds.
TicksToNs frequency(const TranslateNode& ref, const PairMap& pairs, size_t ref_idx) {
  const nlohmann::json f = measure_frequency(ref, pairs, ref_idx);
  if (!f.contains("hz_lo"))
    throw std::runtime_error("netlat: " + f.value("error", std::string("no frequency of the reference")));
  return TicksToNs(f.at("hz").get<double>(), f.at("hz_lo").get<double>(), f.at("hz_hi").get<double>());
}

// What related the nodes: the choices, and per pair what bounded it (the
// relations themselves are translate's to show).
nlohmann::json relation_summary(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes,
                                const PairMap& pairs) {
  nlohmann::json j = {{"method", name_of(opt.method)},
                      {"clock_model", name_of(opt.clock_model)},
                      {"inputs", name_of(opt.inputs)},
                      {"pairs", nlohmann::json::array()}};
  for (const auto& [k, p] : pairs)
    j["pairs"].push_back(
        {{"from", nodes[p.from].name}, {"to", nodes[p.to].name}, {"bounded_by", p.inputs.bounded_by()}});
  return j;
}

// Receiver after receiver, in receive order, so that the cursors move forward
// (sorted on keys copied out, not through the events, far apart in memory).
std::vector<PacketMatch> in_receive_order(std::vector<PacketMatch> m, const std::vector<NodePackets>& raw) {
  std::vector<std::pair<std::pair<uint32_t, uint64_t>, size_t>> order(m.size());
  for (size_t i = 0; i < m.size(); ++i) order[i] = {{m[i].rx_node, raw[m[i].rx_node].events[m[i].rx].ts}, i};
  std::sort(order.begin(), order.end());
  std::vector<PacketMatch> sorted(m.size());
  for (size_t i = 0; i < order.size(); ++i) sorted[i] = m[order[i].second];
  return sorted;
}

// --writes: every TCP and UDP link the packets showed, its writes (datagrams)
// matched to recvs.
void add_writes(const std::vector<SocketEvents>& sockets, PacketDelays& delays,
                const std::function<bool(const NetEvent&)>& by_pid,
                const std::function<bool(uint32_t, uint64_t)>& in_window,
                const std::function<int64_t(const Bound&)>& at_ns, NetlatResult& res, const WriteSink& each) {
  for (const auto& [k, l] : res.flows.links()) {
    if (k.first.proto != IPPROTO_TCP && k.first.proto != IPPROTO_UDP) continue;
    WriteLink& w = res.writes[k];
    auto add = [&](const WriteDelay& d) {
      if ((!by_pid(*d.send) && !by_pid(*d.recv)) || !in_window(k.second.first, d.send->call_ts)) return;
      w.delays.add(d.span.ns, d.span.guaranteed);
      if (!each) return;
      WriteDelay placed = d;
      placed.at_ns = at_ns(d.span.from);
      each(res, placed);
    };
    const auto match = k.first.proto == IPPROTO_TCP ? match_writes : match_messages;
    w.counts = match(k.first, k.second.first, k.second.second, sockets, delays, add);
  }
}

// --since / --until: whether a stamp of node v lies in the window, by its
// estimate on the reference (seconds since the reference's recording start). A
// stamp the relation cannot place is in no window.
std::function<bool(uint32_t, uint64_t)> time_window(const NetlatOptions& opt, const TranslateNode& ref,
                                                    std::optional<uint64_t> start_tsc,
                                                    const std::vector<const Relation*>& to_ref,
                                                    const TicksToNs& ticks_ns) {
  if (!opt.since_s && !opt.until_s) return [](uint32_t, uint64_t) { return true; };
  for (const auto& [flag, v] : {std::pair{"--since", opt.since_s}, {"--until", opt.until_s}})
    if (v && !std::isfinite(*v)) throw std::runtime_error(fmt::format("{} {}: not a number of seconds", flag, *v));
  if (opt.since_s && opt.until_s && !(*opt.since_s < *opt.until_s))
    throw std::runtime_error(fmt::format("--since {} --until {}: the window is empty", *opt.since_s, *opt.until_s));
  if (!start_tsc)
    throw std::runtime_error(ref.name + ": meta.json has no start.tsc: --since/--until need the reference's start");
  const int64_t origin = int64_t(*start_tsc);
  auto ns_of = [](double s) { return std::llround(std::clamp(s, -9e9, 9e9) * 1e9); };  // +-285 years fit int64 ns
  const int64_t lo = opt.since_s ? ns_of(*opt.since_s) : std::numeric_limits<int64_t>::min();
  const int64_t hi = opt.until_s ? ns_of(*opt.until_s) : std::numeric_limits<int64_t>::max();
  // One cursor per node, as PacketDelays has: the stamps come mostly in order,
  // and each packet is placed once for the counts and once more when matched.
  auto cursors = std::make_shared<std::vector<std::optional<RelationCursor>>>(to_ref.size());
  for (size_t v = 0; v < to_ref.size(); ++v)
    if (to_ref[v]) (*cursors)[v].emplace(*to_ref[v]);
  return [=](uint32_t v, uint64_t ts) {
    std::optional<RelationCursor>& c = (*cursors)[v];
    if (!c) return false;
    try {
      const int64_t t = c->at(int64_t(ts)).est - origin;
      const int64_t ns = ticks_ns(t, t, t).ns;
      return ns >= lo && ns < hi;
    } catch (const std::exception&) {
      return false;
    }
  };
}

}  // namespace

NetlatResult netlat(const NetlatOptions& opt, const NetlatSink& each, const WriteSink& each_write) {
  check_options(opt.relate);
  MemoryBudget cpus;
  cpus.threads = opt.relate.threads;
  std::vector<TranslateNode> nodes = open_nodes(opt.relate.dirs, cpus.thread_count());
  const size_t ref = reference_index(nodes, opt.relate.reference);
  const size_t from = node_named(nodes, opt.from, "--from"), to = node_named(nodes, opt.to, "--to");
  std::optional<std::pair<std::array<uint8_t, 16>, uint8_t>> addr;
  if (!opt.addr.empty()) addr = parse_addr(opt.addr);
  warn_unknown_peers(nodes);
  if (std::all_of(nodes.begin(), nodes.end(), [](const TranslateNode& n) { return n.reader->net_event_count() == 0; }))
    throw std::runtime_error("no network events in these traces: record them with `cptrace record --net`");
  if (opt.writes && std::none_of(nodes.begin(), nodes.end(),
                                 [](const TranslateNode& n) { return n.reader->trace_meta().net_send_calls; }))
    throw std::runtime_error(
        "--writes: no send call was stamped in these traces: record them with `cptrace record --net "
        "--net-send-calls`");
  // One pass over each node's net frames: the packets, and for --writes the
  // socket calls beside them.
  std::vector<SocketEvents> sockets(opt.writes ? nodes.size() : 0);
  auto socket_call = [&](size_t i, const NetEvent& e) { add_socket_event(sockets[i], e); };
  const std::vector<NodePackets> raw = opt.writes ? read_net_events(nodes, socket_call) : read_net_events(nodes);
  finish_socket_events(sockets, raw);
  std::vector<PacketMatch> matches;
  const PacketMatches packets = match_packets(raw, &matches);
  const RunRelations rel = relate_nodes(opt.relate, nodes, ref, packets, "netlat");
  const std::vector<std::string> unauth = unauthenticated_rounds(nodes);
  if (!unauth.empty()) say("{}", unauthenticated_warning(unauth));

  NetlatResult res;
  res.reference = nodes[ref].name;
  for (const TranslateNode& n : nodes) res.nodes.push_back(n.name);
  res.relation = relation_summary(opt.relate, nodes, rel.pairs);
  res.matching = packets.total;

  std::vector<const Relation*> to_ref;
  std::vector<Ranges> transitions;
  for (size_t v = 0; v < nodes.size(); ++v) {
    to_ref.push_back(rel.paths.to_ref[v].get());
    transitions.push_back(node_transitions(opt.relate, nodes, ref, rel, v));
  }
  const TicksToNs ticks_ns = frequency(nodes[ref], rel.pairs, ref);
  PacketDelays delays(raw, to_ref, transitions, ticks_ns);
  const std::optional<uint64_t> start_tsc = nodes[ref].reader->trace_meta().start.tsc;
  const auto in_window = time_window(opt, nodes[ref], start_tsc, to_ref, ticks_ns);
  // An instant on the reference (its estimate), as ns since the reference's start.
  auto at_ns = [&](const Bound& on_ref) {
    if (!start_tsc) return int64_t(INT64_MIN);
    const int64_t t = on_ref.est - int64_t(*start_tsc);
    return ticks_ns(t, t, t).ns;
  };
  auto keep = [&](const FlowId& f) {
    if (opt.port && f.sport != *opt.port && f.dport != *opt.port) return false;
    return !addr || (f.family == addr->second && (f.saddr == addr->first || f.daddr == addr->first));
  };
  auto by_pid = [&](const NetEvent& e) {
    return (!opt.pid || e.r.pid == *opt.pid) && (!opt.cgroup || e.r.cgroup == *opt.cgroup);
  };
  for (size_t v = 0; v < nodes.size(); ++v)
    res.flows.count_packets(uint32_t(v), raw[v], [&](const NetEvent& e) {
      return keep(FlowId::of(e.r)) && by_pid(e) && in_window(uint32_t(v), e.ts);
    });
  matches = in_receive_order(std::move(matches), raw);
  for (const PacketMatch& m : matches) {
    if ((from != kAny && m.tx_node != from) || (to != kAny && m.rx_node != to)) continue;
    const NetEvent &tx = raw[m.tx_node].events[m.tx], &rx = raw[m.rx_node].events[m.rx];
    if (!keep(FlowId::of(rx.r)) || !(by_pid(tx) || by_pid(rx)) || !in_window(m.tx_node, tx.ts)) continue;
    PacketDelay d = delays.of(m);
    d.tx_at_ns = at_ns(d.tx_ref);
    res.flows.add(d);
    if (each) each(res, d);
  }
  res.writes_asked = opt.writes;
  if (opt.writes) add_writes(sockets, delays, by_pid, in_window, at_ns, res, each_write);
  return res;
}

}  // namespace cptrace
