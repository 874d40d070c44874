// Minimum one-way delays behind the traffic and the rounds of two recordings of one
// machine (testbed nodes share its TSC and CLOCK_MONOTONIC, so a receive stamp minus
// the transmit stamp of the same packet is its one-way delay as stamped).
//
//   bench_traffic_owd A_DIR B_DIR
//
// Per direction and packet class (TCP data, pure ACK, UDP): matched packets, the
// minimum and median one-way delay on the raw kernel stamps (CLOCK_MONOTONIC), and
// the minimum once each stamp is widened by its conversion error the way translate
// uses it (transmit earlier by ts_err, receive later: the delay a traffic hull
// rests on). Per direction too, the MinRTT rounds' one-way stamps (t2 - t1, t4 - t3)
// and their minimum RTT, raw and widened by both TSC skews as translate does. The
// sum of a direction pair's widened minima is about the narrowest traffic bound,
// the widened minimum RTT that of the rounds. Prints figures only.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cptrace_net.h"
#include "trace/net_codec.h"
#include "trace/trace_reader.h"

using namespace cptrace;

namespace {

using Key = std::tuple<uint8_t, std::string, std::string, uint16_t, uint16_t, uint32_t, uint32_t, uint32_t, uint32_t>;

Key key_of(const cp_net_rec& r) {
  std::string s(reinterpret_cast<const char*>(r.saddr), 16), d(reinterpret_cast<const char*>(r.daddr), 16);
  if (r.proto == 6) return {r.proto, s, d, r.sport, r.dport, r.seq, r.ack, r.len, r.tcp_flags};
  return {r.proto, s, d, r.sport, r.dport, r.len, r.hash, r.ip_id, 0};
}

std::string class_of(const cp_net_rec& r) {
  if (r.proto == 6) return r.len ? "tcp data" : "tcp ack";
  return r.proto == 17 ? "udp" : "other";
}

struct Stamp {
  uint64_t mono, lo, hi;  // raw kernel ns; TSC interval translate uses
};

struct Node {
  std::string name;
  double hz;
  std::map<Key, std::vector<Stamp>> tx;
  std::vector<std::pair<cp_net_rec, Stamp>> rx;
  std::vector<uint64_t> errs;
};

Node load(const std::string& dir) {
  TraceReader tr(dir);
  Node n;
  n.name = tr.meta().value("node", dir);
  n.hz = tr.clock_map().tsc_hz();
  tr.for_each_net_event([&](const NetEvent& e) {
    Stamp s{e.r.ktime_ns, e.ts - std::min(e.ts, e.ts_err), e.ts + e.ts_err};
    n.errs.push_back(e.ts_err);
    if (e.r.kind == CP_NET_PKT_TX) n.tx[key_of(e.r)].push_back(s);
    if (e.r.kind == CP_NET_PKT_RX) n.rx.push_back({e.r, s});
  });
  std::sort(n.errs.begin(), n.errs.end());
  return n;
}

double pct_us(const Node& n, double p) {
  return double(n.errs[std::min(n.errs.size() - 1, size_t(p * n.errs.size()))]) / n.hz * 1e6;
}

double pct(const std::vector<double>& v, double p) { return v[std::min(v.size() - 1, size_t(p * v.size()))]; }

void direction(const Node& s, const Node& d) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;  // raw us, widened us
  for (const auto& [r, st] : d.rx) {
    auto it = s.tx.find(key_of(r));
    if (it == s.tx.end() || it->second.size() != 1) continue;  // unmatched or ambiguous
    const Stamp& t = it->second[0];
    auto& [raw, wide] = by[class_of(r)];
    raw.push_back((double(st.mono) - double(t.mono)) / 1e3);
    wide.push_back((double(st.hi) - double(t.lo)) / s.hz * 1e6);
  }
  for (auto& [c, v] : by) {
    auto& [raw, wide] = v;
    std::sort(raw.begin(), raw.end());
    std::sort(wide.begin(), wide.end());
    // On one machine a receive stamped before its transmit would be a stamp that
    // breaks causality: none may be.
    size_t before = size_t(std::count_if(raw.begin(), raw.end(), [](double v) { return v < 0; }));
    fmt::print(
        "  {} -> {} {:8s} {:6d} packets: one-way min {:6.2f} us, median {:7.2f} us; widened min {:6.2f} us; "
        "received before sent: {}\n",
        s.name, d.name, c, raw.size(), raw[0], pct(raw, 0.5), wide[0], before);
  }
}

void rounds(const std::string& dir_a, const std::string& dir_b) {
  TraceReader a(dir_a), b(dir_b);
  double hz = a.clock_map().tsc_hz();
  uint64_t ea = a.tsc_skew_err(), eb = b.tsc_skew_err();
  std::vector<double> ab, ba, rtt;
  for (const SyncRound& r : a.sync_rounds()) {
    if (!r.kernel_ok) continue;
    ab.push_back((double(r.t2) - double(r.t1)) / hz * 1e6);
    ba.push_back((double(r.t4) - double(r.t3)) / hz * 1e6);
    rtt.push_back(double(r.kernel_rtt()) / hz * 1e6);
  }
  if (rtt.empty()) return fmt::print("  no kernel-stamped rounds\n");
  for (auto* v : {&ab, &ba, &rtt}) std::sort(v->begin(), v->end());
  double skew = 2.0 * double(ea + eb) / hz * 1e6;
  fmt::print("  rounds {} -> {}: {} probes: one-way min {:6.2f} us, median {:6.2f} us\n", a.meta().value("node", ""),
             b.meta().value("node", ""), ab.size(), ab[0], pct(ab, 0.5));
  fmt::print("  rounds {} -> {}: {} replies: one-way min {:6.2f} us, median {:6.2f} us\n", b.meta().value("node", ""),
             a.meta().value("node", ""), ba.size(), ba[0], pct(ba, 0.5));
  fmt::print("  rounds: kernel RTT min {:.2f} us, widened by both TSC skews {:.2f} us\n", rtt[0], rtt[0] + skew);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: bench_traffic_owd A_DIR B_DIR\n");
    return 2;
  }
  Node a = load(argv[1]), b = load(argv[2]);
  for (const Node* n : {&a, &b})
    if (!n->errs.empty())
      fmt::print(
          "  node {}: stamp conversion error (ts_err) of its packets: p10 {:.2f} us, median {:.2f} us, p90 {:.2f} us, "
          "p99 {:.2f} us, max {:.2f} us\n",
          n->name, pct_us(*n, 0.1), pct_us(*n, 0.5), pct_us(*n, 0.9), pct_us(*n, 0.99), pct_us(*n, 1));
  direction(a, b);
  direction(b, a);
  rounds(argv[1], argv[2]);
}
