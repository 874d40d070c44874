#include "analyze/net_dump.h"

#include <fmt/format.h>

namespace cptrace {

const char kNetCsvColumns[] =
    ",proto,family,saddr,sport,daddr,dport,seq,ack,len,tcp_flags,ifindex,netns,gso_segs,gso_size,ip_id,"
    "hash,mono_ns,flags,cgroup";
const char kNetCsvEmpty[] = ",,,,,,,,,,,,,,,,,,,";

void print_net_csv(FILE* out, const std::string& node, const NetEvent& e, const std::string& tail) {
  const cp_net_rec& r = e.r;
  fmt::print(out, "{},{},{},,,{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}{}\n", node,
             net_kind_name(r.kind), e.ts, r.pid, r.tid, r.cpu, net_proto_name(r.proto),
             r.family == 10 ? "ipv6" : "ipv4", net_addr(r, true), r.sport, net_addr(r, false), r.dport, r.seq, r.ack,
             r.len, tcp_flags_text(r.tcp_flags), r.ifindex, r.netns, r.gso_segs, r.gso_size, r.ip_id, r.hash,
             r.ktime_ns, r.flags, r.cgroup, tail);
}

void print_net_text(FILE* out, const NetEvent& e, const PidTable* pids) {
  const cp_net_rec& r = e.r;
  std::string src = net_addr(r, true), dst = net_addr(r, false);
  if (r.family == 10) {
    src = "[" + src + "]";
    dst = "[" + dst + "]";
  }
  fmt::print(out, "{:20} {:<6} {} {}:{} > {}:{} len={}", e.ts, net_kind_name(r.kind), net_proto_name(r.proto), src,
             r.sport, dst, r.dport, r.len);
  bool pkt = r.kind == CP_NET_PKT_TX || r.kind == CP_NET_PKT_RX;
  if (r.proto == 6 && !pkt) fmt::print(out, " seq={}", r.seq);
  if (r.proto == 6 && pkt) fmt::print(out, " seq={} ack={} [{}]", r.seq, r.ack, tcp_flags_text(r.tcp_flags));
  if (r.proto == 17 && pkt) fmt::print(out, " hash={:08x}", r.hash);
  if (r.gso_segs > 1) fmt::print(out, " gso={}x{}", r.gso_segs, r.gso_size);
  fmt::print(out, " if={} netns={} pid={}{} tid={} cpu={}", r.ifindex, r.netns, r.pid,
             pids ? pids->text_suffix(r.pid) : "", r.tid, r.cpu);
  fmt::print(out, "{}\n", r.cgroup ? fmt::format(" cgroup={}", r.cgroup) : "");
}

}  // namespace cptrace
