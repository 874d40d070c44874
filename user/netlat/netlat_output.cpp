// What `cptrace netlat` prints: see netlat_output.h.
#include "netlat/netlat_output.h"

#include <iterator>
#include <set>

#include <fmt/format.h>

#include "trace/net_codec.h"

namespace cptrace {
namespace {

std::string bound_text(const NsBound& b) { return fmt::format("{} [{}, {}]", b.ns, b.lo, b.hi); }

nlohmann::json bound_json(const NsBound& b) { return {{"ns", b.ns}, {"lo", b.lo}, {"hi", b.hi}}; }

// The nodes that sent or received a flow, whether or not a match links them.
std::string side_text(const FlowSide& s) {
  std::string t;
  if (s.tx)
    t += fmt::format("{} sent{}", s.tx, s.retransmitted ? fmt::format(" ({} retransmitted)", s.retransmitted) : "");
  if (s.rx)
    t += fmt::format("{}{} received{}", t.empty() ? "" : ", ", s.rx,
                     s.out_of_order ? fmt::format(" ({} out of order)", s.out_of_order) : "");
  return t;
}

void print_delays(const std::vector<NsBound>& delays, std::FILE* out) {
  const DelaySummary d = summarize(delays);
  if (!d.count) return;
  fmt::print(out, "  delay ns, estimate [strict bound]: min {}  p50 {}  p90 {}  p99 {}  max {}\n", bound_text(d.p.min),
             bound_text(d.p.p50), bound_text(d.p.p90), bound_text(d.p.p99), bound_text(d.p.max));
  fmt::print(out, "  bound width p50 {} ns\n", d.width_p50);
}

void print_link(const NetlatResult& res, const FlowId& f, uint32_t tx, uint32_t rx, const FlowLink& l, std::FILE* out) {
  const FlowSide s = res.flows.side(f, tx), r = res.flows.side(f, rx);
  fmt::print(out, "{}   {} -> {}\n", f.text(), res.nodes[tx], res.nodes[rx]);
  fmt::print(out, "  packets: {} sent by {}{}, {} received by {}{}, {} matched{}\n", s.tx, res.nodes[tx],
             s.retransmitted ? fmt::format(" ({} retransmitted)", s.retransmitted) : "", r.rx, res.nodes[rx],
             r.out_of_order ? fmt::format(" ({} out of order)", r.out_of_order) : "", l.delays.size() + l.unguaranteed,
             l.unguaranteed ? fmt::format(" ({} unbounded: a stamp in a hull transition)", l.unguaranteed) : "");
  print_delays(l.delays, out);
}

// Flows some node saw that no match links to it.
void print_unlinked(const NetlatResult& res, std::FILE* out) {
  std::set<std::pair<FlowId, uint32_t>> linked;
  for (const auto& [k, l] : res.flows.links()) {
    linked.insert({k.first, k.second.first});
    linked.insert({k.first, k.second.second});
  }
  bool first = true;
  for (const auto& [f, by_node] : res.flows.sides())
    for (const auto& [n, s] : by_node) {
      if (linked.count({f, n})) continue;
      if (first) fmt::print(out, "\nseen on one side only (the other end not recorded, or no packet matched):\n");
      first = false;
      fmt::print(out, "  {}   {}: {}\n", f.text(), res.nodes[n], side_text(s));
    }
}

// --writes: the application's view per flow and direction.
void print_writes(const NetlatResult& res, std::FILE* out) {
  fmt::print(out,
             "application's view: each TCP write or UDP datagram, from the entry of its send call on the sender to "
             "the recv that returned its last byte on the receiver\n\n");
  for (const auto& [k, w] : res.writes) {
    const WriteCounts& c = w.counts;
    fmt::print(out, "{}   {} -> {}\n", k.first.text(), res.nodes[k.second.first], res.nodes[k.second.second]);
    fmt::print(
        out, "  writes: {}{}{}, {} delivered{}{}\n", c.writes,
        c.no_start ? fmt::format(" ({} without a call start: sendfile, splice or io_uring)", c.no_start) : "",
        c.unidentified ? fmt::format(" ({} unidentified: their first bytes name no one datagram)", c.unidentified) : "",
        w.delays.delays.size() + w.delays.unguaranteed,
        c.undelivered ? fmt::format(" ({} not returned by a recorded recv)", c.undelivered) : "",
        w.delays.unguaranteed ? fmt::format(" ({} unbounded: a stamp in a hull transition)", w.delays.unguaranteed)
                              : "");
    print_delays(w.delays.delays, out);
  }
}

nlohmann::json percentiles_json(const std::vector<NsBound>& delays, nlohmann::json& j) {
  const DelaySummary d = summarize(delays);
  if (d.count) {
    for (auto f : all_percentiles<NsBound>())
      j["delay_ns"][fmt::format("p{}", int(Percentiles<NsBound>::fraction(f) * 100))] = bound_json(d.p.*f);
    j["width_p50_ns"] = d.width_p50;
  }
  return j;
}

}  // namespace

void print_netlat_text(const NetlatResult& res, std::FILE* out) {
  const PacketMatchStats& m = res.matching;
  fmt::print(out,
             "one-way delay, transmit on the sender -> receive on the receiver (closest to the wire), on {}'s clock; "
             "every bound strict\n",
             res.reference);
  fmt::print(out, "relation: method {}, clock model {}, inputs {}\n", res.relation.value("method", ""),
             res.relation.value("clock_model", ""), res.relation.value("inputs", ""));
  fmt::print(out,
             "receives: {} matched of {} (ambiguous {}, unmatched {}, without handshake {}, same node {}, from a "
             "sender that dropped records {})\n\n",
             m.matched, m.rx, m.ambiguous, m.unmatched, m.no_handshake, m.same_node, m.lossy_sender);
  if (res.writes_asked) return print_writes(res, out);
  for (const auto& [k, l] : res.flows.links()) print_link(res, k.first, k.second.first, k.second.second, l, out);
  print_unlinked(res, out);
}

nlohmann::json netlat_json(const NetlatResult& res) {
  nlohmann::json flows = nlohmann::json::array();
  for (const auto& [k, l] : res.flows.links()) {
    const auto [tx, rx] = k.second;
    const FlowSide s = res.flows.side(k.first, tx), r = res.flows.side(k.first, rx);
    nlohmann::json j = {{"flow", k.first.text()},
                        {"from", res.nodes[tx]},
                        {"to", res.nodes[rx]},
                        {"sent", s.tx},
                        {"retransmitted", s.retransmitted},
                        {"received", r.rx},
                        {"out_of_order", r.out_of_order},
                        {"matched", l.delays.size() + l.unguaranteed},
                        {"unbounded", l.unguaranteed}};
    flows.push_back(percentiles_json(l.delays, j));
  }
  nlohmann::json out = {{"reference", res.reference},
                        {"nodes", res.nodes},
                        {"relation", res.relation},
                        {"matching", res.matching.to_json()},
                        {"flows", flows}};
  if (!res.writes_asked) return out;
  out["writes"] = nlohmann::json::array();
  for (const auto& [k, w] : res.writes) {
    nlohmann::json j = {{"flow", k.first.text()},
                        {"from", res.nodes[k.second.first]},
                        {"to", res.nodes[k.second.second]},
                        {"writes", w.counts.writes},
                        {"without_call_start", w.counts.no_start},
                        {"undelivered", w.counts.undelivered},
                        {"unidentified", w.counts.unidentified},
                        {"delivered", w.delays.delays.size() + w.delays.unguaranteed},
                        {"unbounded", w.delays.unguaranteed}};
    out["writes"].push_back(percentiles_json(w.delays.delays, j));
  }
  return out;
}

const char* const kNetlatCsvHeader =
    "from_node,to_node,proto,saddr,sport,daddr,dport,seq,len,tx_ts,rx_ts,tx_mono_ns,rx_mono_ns,ticks,ticks_lo,"
    "ticks_hi,ns,ns_lo,ns_hi,guaranteed\n";

void append_netlat_csv_row(std::string& buf, const std::vector<std::string>& nodes, const PacketDelay& d) {
  const cp_net_rec& r = d.rx->r;
  fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                 nodes[d.tx_node], nodes[d.rx_node], net_proto_name(r.proto), net_addr(r, true), r.sport,
                 net_addr(r, false), r.dport, r.seq, r.len, d.tx->ts, d.rx->ts, d.tx->r.ktime_ns, r.ktime_ns,
                 d.ticks.est, d.ticks.lo, d.ticks.hi, d.ns.ns, d.ns.lo, d.ns.hi, d.guaranteed);
}

const char* const kWritesCsvHeader =
    "from_node,to_node,proto,saddr,sport,daddr,dport,seq,len,send_ts,recv_ts,send_mono_ns,recv_mono_ns,ticks,ticks_lo,"
    "ticks_hi,ns,ns_lo,ns_hi,guaranteed\n";

void append_write_csv_row(std::string& buf, const std::vector<std::string>& nodes, const WriteDelay& d) {
  const cp_net_rec& r = d.send->r;
  const PacketDelays::Span& s = d.span;
  // The flow's addresses, as its packets carry them: a UDP socket bound to any
  // address sends from none.
  const FlowId& f = d.flow;
  fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                 nodes[d.tx_node], nodes[d.rx_node], net_proto_name(f.proto), f.addr(true), f.sport, f.addr(false),
                 f.dport, r.seq, r.len, d.send->call_ts, d.recv->ts, r.ktime_ns - r.call_ns, d.recv->r.ktime_ns,
                 s.ticks.est, s.ticks.lo, s.ticks.hi, s.ns.ns, s.ns.lo, s.ns.hi, s.guaranteed);
}

NetlatCsv::NetlatCsv(std::FILE* out, const char* header) : out_(out) { buf_ = header; }

NetlatCsv::~NetlatCsv() { flush(); }

void NetlatCsv::row(const std::vector<std::string>& nodes, const PacketDelay& d) {
  append_netlat_csv_row(buf_, nodes, d);
  if (buf_.size() > (1 << 20)) flush();
}

void NetlatCsv::row(const std::vector<std::string>& nodes, const WriteDelay& d) {
  append_write_csv_row(buf_, nodes, d);
  if (buf_.size() > (1 << 20)) flush();
}

void NetlatCsv::flush() {
  std::fwrite(buf_.data(), 1, buf_.size(), out_);
  buf_.clear();
}

}  // namespace cptrace
