#include "net/net_dump.h"

namespace cptrace {

const char kNetCsvColumns[] =
    ",proto,family,saddr,sport,daddr,dport,seq,ack,len,tcp_flags,ifindex,netns,gso_segs,gso_size,ip_id,"
    "hash,mono_ns,flags";
const char kNetCsvEmpty[] = ",,,,,,,,,,,,,,,,,,";

void print_net_csv(FILE* out, const std::string& node, const NetEvent& e, const std::string& tail) {
  const cp_net_rec& r = e.r;
  fprintf(out, "%s,%s,%llu,,,%u,%u,%u,%s,%s,%s,%u,%s,%u,%u,%u,%u,%s,%u,%u,%u,%u,%u,%u,%llu,%u%s\n",
          node.c_str(), net_kind_name(r.kind), (unsigned long long)e.ts, r.pid, r.tid, r.cpu,
          net_proto_name(r.proto), r.family == 10 ? "ipv6" : "ipv4", net_addr(r, true).c_str(), r.sport,
          net_addr(r, false).c_str(), r.dport, r.seq, r.ack, r.len, tcp_flags_text(r.tcp_flags).c_str(),
          r.ifindex, r.netns, r.gso_segs, r.gso_size, r.ip_id, r.hash, (unsigned long long)r.ktime_ns,
          r.flags, tail.c_str());
}

void print_net_text(FILE* out, const NetEvent& e, const PidTable* pids) {
  const cp_net_rec& r = e.r;
  std::string src = net_addr(r, true), dst = net_addr(r, false);
  if (r.family == 10) {
    src = "[" + src + "]";
    dst = "[" + dst + "]";
  }
  fprintf(out, "%20llu %-6s %s %s:%u > %s:%u len=%u", (unsigned long long)e.ts, net_kind_name(r.kind),
          net_proto_name(r.proto), src.c_str(), r.sport, dst.c_str(), r.dport, r.len);
  bool pkt = r.kind == CP_NET_PKT_TX || r.kind == CP_NET_PKT_RX;
  if (r.proto == 6 && !pkt) fprintf(out, " seq=%u", r.seq);
  if (r.proto == 6 && pkt) fprintf(out, " seq=%u ack=%u [%s]", r.seq, r.ack, tcp_flags_text(r.tcp_flags).c_str());
  if (r.proto == 17 && pkt) fprintf(out, " hash=%08x", r.hash);
  if (r.gso_segs > 1) fprintf(out, " gso=%ux%u", r.gso_segs, r.gso_size);
  fprintf(out, " if=%u netns=%u pid=%u%s tid=%u cpu=%u\n", r.ifindex, r.netns, r.pid,
          pids ? pids->text_suffix(r.pid).c_str() : "", r.tid, r.cpu);
}

}  // namespace cptrace
