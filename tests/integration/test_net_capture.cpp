// `cptrace record --net` on the real kernel, in real namespaces (tools/testbed.sh):
// a client in node 1 sends known messages to a server in node 2 while one recorder
// per node runs inside that node (`ip netns exec NS cptrace record --net --netns
// self`). The two traces must match segment by segment: every data segment node 1
// transmits is received by node 2 (TCP: by sequence range; UDP: by payload hash and
// IPv4 id), byte totals equal what the application sent, nothing of another
// namespace appears, and no receive precedes its send on the shared clock.
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "record_util.h"
#include "os/cgroup_dirs.h"
#include "test_util.h"
#include "sync/kernel_timestamps.h"
#include "testbed_util.h"
#include "trace/net_codec.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using testbed::skip_reason;
using testutil::Proc;
using testutil::TempDir;

namespace {

constexpr int kTcpMessages = 200;
constexpr int kUdpMessages = 150;

struct NetTrace {
  std::vector<NetEvent> ev;
  Counters counters;
  uint64_t recorded = 0;
  nlohmann::json net_meta;  // meta.json "net": filters and stamp points
};

NetTrace load(const std::string& dir) {
  TraceReader r(dir);
  EXPECT_FALSE(r.error()) << r.error()->what();
  NetTrace t;
  r.for_each_net_event([&](const NetEvent& e) { t.ev.push_back(e); });
  t.counters = r.net_counters();
  t.recorded = r.net_event_count();
  t.net_meta = r.meta().value("net", nlohmann::json::object());
  return t;
}

uint32_t ns_inode(const std::string& ns) {
  struct stat st {};
  EXPECT_EQ(stat(("/run/netns/" + ns).c_str(), &st), 0) << ns;
  return uint32_t(st.st_ino);
}

std::string netload() { return (testutil::build_dir() / "tests" / "netload").string(); }

std::string addr_text(const cp_net_rec& r, bool src) { return net_addr(r, src); }

bool is_pkt(const cp_net_rec& r) { return r.kind == CP_NET_PKT_TX || r.kind == CP_NET_PKT_RX; }

// A recorder inside a node's namespace; stopped with SIGINT like a user's Ctrl-C.
struct Recorder {
  std::unique_ptr<Proc> p;
  std::string dir;
  // inside: run in the node (`ip netns exec`, --netns self); else from the host
  // namespace with --netns /run/netns/NS.
  Recorder(const TempDir& tmp, const std::string& ns, const std::string& name, const std::string& extra,
           bool inside = true) {
    dir = tmp / name;
    std::string pre = inside ? "ip netns exec " + ns + " " : "";
    std::string netns = inside ? "self" : "/run/netns/" + ns;
    p = std::make_unique<Proc>(
        pre + testutil::cptrace_bin() + " record --net --netns " + netns + " --no-progress -o " + dir + " " + extra,
        tmp / (name + ".out"), tmp / (name + ".err"));
  }
  bool ready() { return p->wait_for("attached", 20, true); }
  std::string err() const { return testutil::read_file(p->err_path); }
  int stop() {
    kill(p->pid, SIGINT);
    return p->wait(30);
  }
};

// Every counter adds up and nothing was dropped.
void expect_accounted(const NetTrace& t, const std::string& what) {
  EXPECT_EQ(t.recorded + t.counters.total_dropped(), t.counters.total_seen()) << what;
  EXPECT_EQ(t.counters.total_dropped(), 0u) << what;
  EXPECT_EQ(t.recorded, t.ev.size()) << what;
}

struct PairRun {
  NetTrace a, b;
  long sent = 0;
  int cport = 0;
  uint32_t ns_a = 0, ns_b = 0;
};

// Server in node 2, recorders in both nodes, client in node 1; waits for both ends.
PairRun run_pair(testbed::Testbed& tb, const TempDir& tmp, bool tcp, const std::string& server_ip, int port,
                 int count) {
  PairRun run;
  std::string proto = tcp ? "tcp" : "udp";
  Proc server("ip netns exec " + tb.ns(2) + " " + netload() + " server " + proto + " " + server_ip + " " +
                  std::to_string(port) + " " + std::to_string(count),
              tmp / "server.out", tmp / "server.err");
  EXPECT_TRUE(server.wait_for("ready", 10)) << testutil::read_file(server.err_path);
  Recorder ra(tmp, tb.ns(1), "a", ""), rb(tmp, tb.ns(2), "b", "");
  EXPECT_TRUE(ra.ready()) << ra.err();
  EXPECT_TRUE(rb.ready()) << rb.err();
  testutil::RunResult c = testutil::run("ip netns exec " + tb.ns(1) + " " + netload() + " client " + proto + " " +
                                            server_ip + " " + std::to_string(port) + " " + std::to_string(count),
                                        tmp);
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(server.wait(30), 0);
  std::string sout = testutil::read_file(server.out_path);
  EXPECT_EQ(ra.stop(), 0) << ra.err();
  EXPECT_EQ(rb.stop(), 0) << rb.err();
  sscanf(c.out.c_str() + c.out.find("sent"), "sent %ld %d", &run.sent, &run.cport);
  long got = -1, msgs = -1;
  sscanf(sout.c_str() + sout.find("received"), "received %ld %ld", &got, &msgs);
  EXPECT_EQ(got, run.sent) << "the application itself lost data";
  run.a = load(ra.dir);
  run.b = load(rb.dir);
  run.ns_a = ns_inode(tb.ns(1));
  run.ns_b = ns_inode(tb.ns(2));
  expect_accounted(run.a, "node 1");
  expect_accounted(run.b, "node 2");
  return run;
}

// Nothing from another namespace (the router's, the host's, the other node's), and
// every TCP/UDP packet is between the two endpoints.
void expect_only_own(const PairRun& r, const std::string& ip1, const std::string& ip2) {
  for (auto [t, ns] : {std::pair{&r.a, r.ns_a}, std::pair{&r.b, r.ns_b}}) {
    ASSERT_FALSE(t->ev.empty());
    for (const NetEvent& e : t->ev) {
      ASSERT_EQ(e.r.netns, ns) << "an event of another network namespace";
      if (is_pkt(e.r) && (e.r.proto == 6 || e.r.proto == 17)) {
        std::set<std::string> ends = {addr_text(e.r, true), addr_text(e.r, false)};
        EXPECT_EQ(ends, (std::set<std::string>{ip1, ip2})) << "a packet between other endpoints";
      }
    }
  }
}

std::vector<NetEvent> select(const NetTrace& t, uint8_t kind, uint8_t proto, int sport, int dport, bool data) {
  std::vector<NetEvent> v;
  for (const NetEvent& e : t.ev)
    if (e.r.kind == kind && e.r.proto == proto && e.r.sport == sport && e.r.dport == dport && (!data || e.r.len > 0))
      v.push_back(e);
  return v;
}

long sum_len(const std::vector<NetEvent>& v) {
  long s = 0;
  for (auto& e : v) s += e.r.len;
  return s;
}

// TCP: every received data segment is matched to the latest earlier transmission of
// the same byte range [seq, seq+len); a transmission of bytes already sent is a
// retransmission. TCP may retransmit without any loss (a spurious timeout on a busy
// machine), so even on a lossless link the checks are what must hold whatever TCP
// chose: each byte first sent once and in order, every repeat of a byte range counted
// as a retransmission, every segment received one that was sent (no more often than
// it was sent), the whole stream received. Returns the number of retransmissions.
int check_tcp(const PairRun& r, int port, bool lossy, uint64_t min_delay_ns) {
  auto tx = select(r.a, CP_NET_PKT_TX, 6, r.cport, port, true);
  auto rx = select(r.b, CP_NET_PKT_RX, 6, r.cport, port, true);
  EXPECT_FALSE(tx.empty());
  EXPECT_FALSE(rx.empty());
  if (tx.empty() || rx.empty()) return 0;
  // The application's bytes, on both socket paths.
  EXPECT_EQ(sum_len(select(r.a, CP_NET_SOCK_SEND, 6, r.cport, port, true)), r.sent);
  EXPECT_EQ(sum_len(select(r.b, CP_NET_SOCK_RECV, 6, port, r.cport, true)), r.sent);

  std::sort(tx.begin(), tx.end(), [](auto& x, auto& y) { return x.r.ktime_ns < y.r.ktime_ns; });
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const NetEvent*>> by_range;
  uint32_t isn = tx.front().r.seq;
  uint64_t high = 0;  // highest stream offset sent so far
  int retrans = 0;
  long new_bytes = 0;  // bytes transmitted for the first time
  for (const NetEvent& e : tx) {
    uint64_t lo = uint32_t(e.r.seq - isn), hi = lo + e.r.len;
    if (lo < high)
      retrans++;
    else
      EXPECT_EQ(lo, high) << "a gap in the transmitted stream";
    if (hi > high) new_bytes += long(hi - std::max(lo, high));
    high = std::max(high, hi);
    by_range[{e.r.seq, e.r.len}].push_back(&e);
  }
  EXPECT_EQ(high, uint64_t(r.sent)) << "bytes of the stream transmitted by node 1";
  EXPECT_EQ(new_bytes, r.sent) << "each byte of the stream first transmitted once";
  EXPECT_GE(retrans, int(tx.size() - by_range.size())) << "a repeated byte range not counted as a retransmission";
  EXPECT_LE(rx.size(), tx.size());
  std::map<std::pair<uint32_t, uint32_t>, size_t> received;
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  for (const NetEvent& e : rx) {
    auto it = by_range.find({e.r.seq, e.r.len});
    if (it == by_range.end()) {
      ADD_FAILURE() << "received segment seq=" << e.r.seq << " len=" << e.r.len << " was never transmitted";
      continue;
    }
    const NetEvent* m = nullptr;  // the latest transmission before this receive
    for (const NetEvent* t : it->second)
      if (t->r.ktime_ns <= e.r.ktime_ns) m = t;
    if (!m) {
      ADD_FAILURE() << "segment seq=" << e.r.seq << " received before any transmission of it";
      continue;
    }
    EXPECT_GE(e.ts, m->ts) << "receive earlier than send in TSC";
    EXPECT_GE(e.r.ktime_ns - m->r.ktime_ns, min_delay_ns) << "one-way time below the link delay";
    size_t times = ++received[it->first];
    EXPECT_LE(times, it->second.size()) << "segment seq=" << e.r.seq << " received more often than it was sent";
    covered.push_back({uint32_t(e.r.seq - isn), uint32_t(e.r.seq - isn) + e.r.len});
  }
  (void)lossy;  // a lossy link only makes retransmissions likely; the checks are the same
  // The receiver saw the whole stream.
  std::sort(covered.begin(), covered.end());
  uint64_t end = 0;
  for (auto [lo, hi] : covered) {
    EXPECT_LE(lo, end) << "a hole in the received stream at offset " << end;
    end = std::max(end, hi);
  }
  EXPECT_EQ(end, uint64_t(r.sent));
  printf("      %zu data segments sent, %zu received, %ld bytes, %d retransmissions\n", tx.size(), rx.size(), r.sent,
         retrans);
  return retrans;
}

}  // namespace

class NetCapture : public ::testing::Test {
 public:
  void SetUp() override {
    REQUIRE_TESTBED();
    if (!testbed::is_file(netload())) GTEST_SKIP() << "SKIPPED: " << netload() << " not built";
  }
  TempDir tmp;
};
using NetCapture_Env = NetCapture;

TEST_F(NetCapture, TcpTwoNamespacesMatchSegmentForSegment) {
  testbed::Testbed tb("ntcp", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, true, "10.77.2.2", 7001, kTcpMessages);
  expect_only_own(r, "10.77.1.2", "10.77.2.2");
  check_tcp(r, 7001, false, 0);
}

TEST_F(NetCapture, TcpIpv6) {
  testbed::Testbed tb("nipv", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, true, "fd77::2:2", 7002, kTcpMessages);
  expect_only_own(r, "fd77::1:2", "fd77::2:2");
  for (const NetEvent& e : r.a.ev) {
    if (is_pkt(e.r) && e.r.proto == 6) {
      EXPECT_EQ(e.r.family, 10);
    }
  }
  check_tcp(r, 7002, false, 0);
}

TEST_F(NetCapture, TcpThroughDelayingLink) {
  testbed::Testbed tb("ndly", 2, "--delay 300");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, true, "10.77.2.2", 7003, kTcpMessages);
  expect_only_own(r, "10.77.1.2", "10.77.2.2");
  check_tcp(r, 7003, false, 300000);
}

TEST_F(NetCapture, TcpWithLossRecognisesRetransmissions) {
  testbed::Testbed tb("nlos", 2, "--loss 5 --seed 7");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, true, "10.77.2.2", 7004, kTcpMessages);
  expect_only_own(r, "10.77.1.2", "10.77.2.2");
  int retrans = check_tcp(r, 7004, true, 0);
  EXPECT_GT(retrans, 0) << "5% loss over ~" << kTcpMessages << " segments caused no retransmission";
  printf("      %d retransmissions recognised\n", retrans);
}

TEST_F(NetCapture, UdpMatchedByPayloadHash) {
  testbed::Testbed tb("nudp", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, false, "10.77.2.2", 7005, kUdpMessages);
  expect_only_own(r, "10.77.1.2", "10.77.2.2");
  auto tx = select(r.a, CP_NET_PKT_TX, 17, r.cport, 7005, false);
  auto rx = select(r.b, CP_NET_PKT_RX, 17, r.cport, 7005, false);
  ASSERT_EQ(tx.size(), size_t(kUdpMessages));
  ASSERT_EQ(rx.size(), size_t(kUdpMessages));
  EXPECT_EQ(sum_len(tx), r.sent);
  EXPECT_EQ(sum_len(rx), r.sent);
  EXPECT_EQ(sum_len(select(r.a, CP_NET_SOCK_SEND, 17, r.cport, 7005, true)), r.sent);
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, const NetEvent*> sent;
  for (const NetEvent& e : tx)
    EXPECT_TRUE(sent.emplace(std::tuple{e.r.hash, e.r.len, e.r.ip_id}, &e).second) << "two datagrams share a key";
  for (const NetEvent& e : rx) {
    auto it = sent.find({e.r.hash, e.r.len, e.r.ip_id});
    ASSERT_NE(it, sent.end()) << "received datagram never sent";
    EXPECT_GE(e.ts, it->second->ts);
    EXPECT_GE(e.r.ktime_ns, it->second->r.ktime_ns);
    sent.erase(it);  // exactly once
  }
  EXPECT_TRUE(sent.empty());
}

namespace {
// `ethtool -K IFNAME gro|tso on|off` inside namespace NS, through the legacy ioctl
// (ETHTOOL_SGRO, ETHTOOL_STSO), from a thread that enters NS alone. "" or the error.
std::string set_offload(const std::string& ns, const std::string& ifname, uint32_t cmd, bool on) {
  std::string err;
  std::thread t([&] {
    int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0 || setns(target, CLONE_NEWNET) != 0) {
      err = fmt::format("entering {}: {}", ns, strerror(errno));
      if (target >= 0) close(target);
      return;
    }
    close(target);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ethtool_value v{cmd, on ? 1u : 0u};
    ifreq ifr{};
    strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (fd < 0 || ioctl(fd, SIOCETHTOOL, &ifr) != 0)
      err = fmt::format("ethtool ioctl {:#x} on {} in {}: {}", cmd, ifname, ns, strerror(errno));
    if (fd >= 0) close(fd);
  });
  t.join();
  return err;
}

// A veth pair NAME straight between testbed nodes 1 and 2 (no forwarder between
// them), addressed PREFIX.1 and PREFIX.2 (/24) and up; destroyed with the nodes'
// namespaces when the testbed goes down. "" or what failed.
std::string add_direct_veth(const testbed::Testbed& tb, const std::string& name, const std::string& prefix,
                            const TempDir& tmp) {
  for (std::string cmd :
       {"ip link add " + name + " netns " + tb.ns(1) + " type veth peer name " + name + " netns " + tb.ns(2),
        "ip -n " + tb.ns(1) + " addr add " + prefix + ".1/24 dev " + name,
        "ip -n " + tb.ns(2) + " addr add " + prefix + ".2/24 dev " + name,
        "ip -n " + tb.ns(1) + " link set " + name + " up", "ip -n " + tb.ns(2) + " link set " + name + " up"}) {
    auto c = testutil::run(cmd, tmp);
    if (c.status != 0) return cmd + ": " + c.err;
  }
  return "";
}
}  // namespace

// GRO on a veth (NAPI mode), on a direct link between the two nodes (through the
// router's forwarder frames arrive one by one and are never merged; node 1 without
// TSO, so that its MSS-sized frames are eligible for GRO): a receive is stamped at
// napi_gro_receive_entry, before GRO, unless GRO merged later segments into its
// skb, which then keeps the netif_receive_skb stamp (flag CP_NETF_RX_GREW): a
// receive spanning several transmitted segments is flagged so, and a flagged one
// spans several. Every received byte is stamped after the first transmission of
// that byte (what translate pairs it with). (On this link the poll runs after the
// merged segments were all queued, so their early stamp would not break that
// order here; on a NIC the poll can merge segments that arrived after it began.)
TEST_F(NetCapture, TcpThroughGroNoByteStampedBeforeItsSend) {
  testbed::Testbed tb("ngro", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  ASSERT_EQ(add_direct_veth(tb, "gro0", "10.77.99", tmp), "");
  ASSERT_EQ(set_offload(tb.ns(1), "gro0", ETHTOOL_STSO, false), "");
  ASSERT_EQ(set_offload(tb.ns(2), "gro0", ETHTOOL_SGRO, true), "");
  const int port = 7011, count = 2000;  // enough back-to-back segments for GRO to merge some
  PairRun r = run_pair(tb, tmp, true, "10.77.99.2", port, count);
  auto tx = select(r.a, CP_NET_PKT_TX, 6, r.cport, port, true);
  auto rx = select(r.b, CP_NET_PKT_RX, 6, r.cport, port, true);
  ASSERT_FALSE(tx.empty());
  ASSERT_FALSE(rx.empty());
  const nlohmann::json st = r.b.net_meta.value("rx_stamp", nlohmann::json::array());
  bool early = std::find(st.begin(), st.end(), "napi_gro_receive_entry") != st.end();
  // First transmission of every byte: [lo, hi) stream offsets first sent at ktime.
  std::sort(tx.begin(), tx.end(), [](auto& x, auto& y) { return x.r.ktime_ns < y.r.ktime_ns; });
  uint32_t isn = tx.front().r.seq;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> first;  // lo -> (hi, ktime)
  uint64_t high = 0;
  std::vector<std::pair<uint64_t, uint64_t>> resent;  // [lo, hi) transmitted again
  for (const NetEvent& e : tx) {
    uint64_t lo = uint32_t(e.r.seq - isn), hi = lo + e.r.len;
    if (lo < high) resent.push_back({lo, hi});
    if (hi > high) first[std::max(lo, high)] = {hi, e.r.ktime_ns};
    high = std::max(high, hi);
  }
  auto was_resent = [&](uint64_t lo, uint64_t hi) {
    return std::any_of(resent.begin(), resent.end(), [&](auto& x) { return x.first < hi && lo < x.second; });
  };
  auto first_tx = [&](uint64_t b) -> int64_t {  // -1: never transmitted
    auto it = first.upper_bound(b);
    if (it == first.begin()) return -1;
    --it;
    return b < it->second.first ? int64_t(it->second.second) : -1;
  };
  std::map<std::string, int> at;
  int grew = 0;
  for (const NetEvent& e : rx) {
    at[net_stamp_name(e.r.kind, e.r.stamp_at)]++;
    uint64_t lo = uint32_t(e.r.seq - isn), last = lo + e.r.len - 1;
    int64_t sent_lo = first_tx(lo), sent_last = first_tx(last);
    ASSERT_GE(sent_lo, 0) << "received bytes never transmitted at offset " << lo;
    ASSERT_GE(sent_last, 0) << "received bytes never transmitted at offset " << last;
    EXPECT_GE(int64_t(e.r.ktime_ns), std::max(sent_lo, sent_last))
        << "a receive stamped (at " << net_stamp_name(e.r.kind, e.r.stamp_at) << ") before the send of its bytes ["
        << lo << ", " << last << "]";
    // Spanning several transmitted segments (and no retransmission, which TCP may
    // collapse): GRO merged them, so the receive must not claim the early stamp.
    bool spans = first.upper_bound(lo) != first.upper_bound(last);
    if (spans && !was_resent(lo, last + 1)) {
      EXPECT_TRUE(e.r.flags & CP_NETF_RX_GREW) << "bytes [" << lo << ", " << last << "] merged by GRO, stamped at "
                                               << net_stamp_name(e.r.kind, e.r.stamp_at);
    }
    if (e.r.flags & CP_NETF_RX_GREW) {
      ++grew;
      EXPECT_EQ(e.r.stamp_at, CP_NET_AT_KIND) << "a grown skb took its early stamp";
      EXPECT_TRUE(spans) << "grown, yet within one transmitted segment";
    } else if (early) {
      EXPECT_EQ(e.r.stamp_at, CP_NET_AT_NAPI_GRO_RECEIVE_ENTRY)
          << "stamped at " << net_stamp_name(e.r.kind, e.r.stamp_at) << " on the GRO path";
    }
  }
  std::string counts;
  for (auto& [name, n] : at) counts += fmt::format(" {} {}", n, name);
  printf("      %zu data segments sent, %zu received:%s; %d merged by GRO\n", tx.size(), rx.size(), counts.c_str(),
         grew);
}

// A receive is stamped at the earliest point of its path, and recorded once: the
// testbed's veths hand every frame to netif_rx (before the backlog queue), so each
// of the N datagrams gives exactly one rx record, stamped there, after its send.
TEST_F(NetCapture, UdpReceivesStampedBeforeTheBacklogExactlyOnce) {
  testbed::Testbed tb("nrxs", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, false, "10.77.2.2", 7010, kUdpMessages);
  const nlohmann::json& st = r.b.net_meta.value("rx_stamp", nlohmann::json::array());
  ASSERT_FALSE(st.empty()) << "meta.json net.rx_stamp: " << r.b.net_meta.dump();
  EXPECT_EQ(st.back(), "netif_receive_skb") << st.dump();
  EXPECT_EQ(r.b.net_meta.value("tx_stamp", ""), "net_dev_start_xmit");
  // Where this kernel lacks an entry point, every receive is stamped late (and
  // record said so): then the records must say that instead.
  bool early = std::find(st.begin(), st.end(), "netif_rx") != st.end();
  uint8_t want = early ? CP_NET_AT_NETIF_RX : CP_NET_AT_KIND;
  auto tx = select(r.a, CP_NET_PKT_TX, 17, r.cport, 7010, false);
  auto rx = select(r.b, CP_NET_PKT_RX, 17, r.cport, 7010, false);
  ASSERT_EQ(tx.size(), size_t(kUdpMessages));
  ASSERT_EQ(rx.size(), size_t(kUdpMessages)) << "receives recorded twice or lost";
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, const NetEvent*> sent;
  for (const NetEvent& e : tx) sent.emplace(std::tuple{e.r.hash, e.r.len, e.r.ip_id}, &e);
  for (const NetEvent& e : rx) {
    EXPECT_EQ(e.r.stamp_at, want) << "stamped at " << net_stamp_name(e.r.kind, e.r.stamp_at);
    EXPECT_EQ(e.r.flags & CP_NETF_RX_GREW, 0) << "a datagram cannot grow in GRO";
    auto it = sent.find({e.r.hash, e.r.len, e.r.ip_id});
    ASSERT_NE(it, sent.end()) << "received datagram never sent";
    EXPECT_GE(e.r.ktime_ns, it->second->r.ktime_ns) << "receive stamped before its send";
    sent.erase(it);
  }
  EXPECT_TRUE(sent.empty());
  // info says where the receives were stamped, and how many at each point.
  auto info = testutil::run(testutil::cptrace_bin() + " info --json " + (tmp / "b"), tmp);
  ASSERT_EQ(info.status, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  const auto& at = j["net"]["stamps"]["rx_stamped_at"];
  std::string name = net_stamp_name(CP_NET_PKT_RX, want);
  ASSERT_TRUE(at.contains(name)) << at.dump();
  // Every receive of node 2 (the datagrams and whatever else reached it) at one point.
  size_t all_rx = 0;
  for (const NetEvent& e : r.b.ev) all_rx += e.r.kind == CP_NET_PKT_RX;
  EXPECT_EQ(at[name].get<size_t>(), all_rx) << at.dump();
}

namespace {
// f() on a thread that entered namespace `ns` alone (sockets keep their namespace).
template <class F>
std::string in_netns(const std::string& ns, F f) {
  std::string err;
  std::thread t([&] {
    int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0 || setns(target, CLONE_NEWNET) != 0) {
      err = fmt::format("entering {}: {}", ns, strerror(errno));
    } else {
      try {
        f();
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    if (target >= 0) close(target);
  });
  t.join();
  return err;
}

// The payload hash of a UDP record (bpf/netcap.bpf.c): FNV-1a of the first bytes.
uint32_t fnv1a(const std::string& p) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < p.size() && i < CP_NET_HASH_BYTES; ++i) h = (h ^ uint8_t(p[i])) * 16777619u;
  return h;
}
}  // namespace

// Our stamps against the kernel's own software stamps of the same datagrams (what
// the MinRTT rounds use): the transmit stamp, read when the net_dev_start_xmit
// program ends, must still precede the driver's SO_TIMESTAMPING transmit stamp
// (skb_tx_timestamp in veth_xmit), and the receive stamp (netif_rx) must not
// precede the receive stamp the kernel takes in netif_rx_internal. Either failing
// would be a stamp outside the packet's time at that node: a traffic bound that
// could miss the truth. On a direct veth pair, so nothing else lies between them.
// Software stamps are CLOCK_REALTIME: converted with the REALTIME - MONOTONIC offset
// bracketed around each datagram, on the side that can only make the checks pass
// more rarely; a datagram during which the clock was stepped (another test may step
// it) is left out, and at most a few may be.
TEST_F(NetCapture, StampsBracketTheKernelsSoftwareStamps) {
  testbed::Testbed tb("nsts", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  ASSERT_EQ(add_direct_veth(tb, "sts0", "10.77.98", tmp), "");
  const int port = 7021, count = 200;
  int tx = -1, rx = -1;
  ASSERT_EQ(in_netns(tb.ns(1), [&] { tx = open_stamped_udp(AF_INET, true, false); }), "");
  ASSERT_EQ(in_netns(tb.ns(2), [&] { rx = open_stamped_udp(AF_INET, false, true); }), "");
  testbed::Addr dst = testbed::make_addr("10.77.98.2", port);
  ASSERT_EQ(bind(rx, reinterpret_cast<sockaddr*>(&dst.ss), dst.len), 0) << strerror(errno);
  testbed::set_timeout(rx, 2000);
  // Both namespaces from the host, one recorder: the sender's tx and the receiver's rx.
  Proc rec(
      testutil::cptrace_bin() + " record --net --port " + std::to_string(port) + " --no-progress -o " + (tmp / "rec"),
      tmp / "rec.out", tmp / "rec.err");
  ASSERT_TRUE(testutil::attached(rec, 20));

  struct Kernel {
    uint64_t tx, rx;  // the kernel's stamps, CLOCK_REALTIME
    int64_t off_lo, off_hi;  // REALTIME - MONOTONIC meanwhile
  };
  std::map<uint32_t, Kernel> sw;  // by payload hash
  int stepped = 0;
  for (int i = 0; i < count; ++i) {
    RealMonoOffset before = sample_real_mono_offset(5);
    std::string msg = fmt::format("{:<48}", fmt::format("stamp check {}", i));
    ASSERT_EQ(sendto(tx, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&dst.ss), dst.len), ssize_t(msg.size()))
        << strerror(errno);
    std::optional<uint64_t> t = read_tx_stamp(tx, uint32_t(i), 2000);
    ASSERT_TRUE(t) << "no transmit stamp for datagram " << i;
    char buf[128];
    sockaddr_storage from{};
    socklen_t fl = sizeof from;
    uint64_t r = 0;
    ASSERT_EQ(recv_stamped(rx, buf, sizeof buf, &from, &fl, &r), ssize_t(msg.size())) << strerror(errno);
    ASSERT_NE(r, 0u) << "no receive stamp for datagram " << i;
    RealMonoOffset after = sample_real_mono_offset(5);
    if (before.hi < after.lo || after.hi < before.lo)
      stepped++;  // the true offset lies in both intervals, and they do not meet
    else
      sw[fnv1a(msg)] = {*t, r, std::max(before.lo, after.lo), std::min(before.hi, after.hi)};
    usleep(2000);  // one at a time, from a CPU that may have gone idle, like a paced sender
  }
  close(tx);
  close(rx);
  kill(rec.pid, SIGINT);
  ASSERT_EQ(rec.wait(30), 0) << testutil::read_file(rec.err_path);
  ASSERT_LE(stepped, 5) << "CLOCK_REALTIME stepped during too many datagrams";

  NetTrace t = load(tmp / "rec");
  expect_accounted(t, "recorder");
  std::map<uint32_t, uint64_t> ours_tx, ours_rx;
  for (const NetEvent& e : t.ev) {
    if (e.r.proto != 17 || e.r.dport != port || !sw.count(e.r.hash)) continue;
    auto& ours = e.r.kind == CP_NET_PKT_TX ? ours_tx : ours_rx;
    if (e.r.kind == CP_NET_PKT_TX || e.r.kind == CP_NET_PKT_RX) {
      ASSERT_TRUE(ours.emplace(e.r.hash, e.r.ktime_ns).second) << "recorded twice: " << net_kind_name(e.r.kind);
    }
  }
  ASSERT_EQ(ours_tx.size(), sw.size());
  ASSERT_EQ(ours_rx.size(), sw.size());
  int64_t tx_lead = INT64_MAX, rx_lag = INT64_MAX, off_width = 0;  // for the log
  for (auto& [h, k] : sw) {
    int64_t k_tx_latest = int64_t(k.tx) - k.off_lo, k_rx_earliest = int64_t(k.rx) - k.off_hi;
    off_width = std::max(off_width, k.off_hi - k.off_lo);
    EXPECT_LE(int64_t(ours_tx[h]), k_tx_latest) << "our transmit stamp after the driver's";
    EXPECT_GE(int64_t(ours_rx[h]), k_rx_earliest) << "our receive stamp before the kernel's";
    tx_lead = std::min(tx_lead, k_tx_latest - int64_t(ours_tx[h]));
    rx_lag = std::min(rx_lag, int64_t(ours_rx[h]) - k_rx_earliest);
  }
  printf(
      "      %zu datagrams (%d left out: clock stepped); offset known to %ld ns; smallest margins: transmit %ld ns "
      "before the driver's stamp, receive %ld ns after the kernel's\n",
      sw.size(), stepped, long(off_width), long(tx_lead), long(rx_lag));
}

namespace {
// What a filter must not change about an event (timestamps differ between two
// recorders: each program reads the clock itself).
using Key = std::tuple<uint8_t, uint8_t, uint16_t, uint16_t, uint32_t, uint32_t, uint32_t, uint8_t, uint32_t>;
Key key(const cp_net_rec& r) { return {r.kind, r.proto, r.sport, r.dport, r.seq, r.ack, r.len, r.tcp_flags, r.hash}; }
}  // namespace
namespace {
// Empty when equal; else the first differences, readable.
std::string diff(const std::multiset<Key>& got, const std::multiset<Key>& want) {
  std::vector<Key> extra, missing;
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::string s;
  auto show = [&](const char* what, const std::vector<Key>& v) {
    for (size_t i = 0; i < v.size() && i < 8; ++i) {
      auto [kind, proto, sp, dp, seq, ack, len, fl, h] = v[i];
      s += fmt::format("{} {} proto={} {}>{} seq={} ack={} len={} flags={}\n", what, net_kind_name(kind), proto, sp, dp,
                       seq, ack, len, tcp_flags_text(fl));
    }
    if (v.size() > 8) s += fmt::format("{} ... {} in all\n", what, v.size());
  };
  show("extra", extra);
  show("missing", missing);
  return s;
}

std::multiset<Key> keys(const NetTrace& t, const std::function<bool(const cp_net_rec&)>& keep) {
  std::multiset<Key> s;
  for (const NetEvent& e : t.ev)
    if (keep(e.r)) s.insert(key(e.r));
  return s;
}
}  // namespace

// Two recorders in node 1 at once, one unfiltered and one with --port: the
// filtered trace is exactly the unfiltered one restricted to that port.
TEST_F(NetCapture, PortFilterKeepsExactlyThatPort) {
  testbed::Testbed tb("nprt", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  Proc s1("ip netns exec " + tb.ns(2) + " " + netload() + " server tcp 10.77.2.2 7011", tmp / "s1.out", tmp / "s1.err");
  Proc s2("ip netns exec " + tb.ns(2) + " " + netload() + " server tcp 10.77.2.2 7012", tmp / "s2.out", tmp / "s2.err");
  ASSERT_TRUE(s1.wait_for("ready", 10) && s2.wait_for("ready", 10));
  Recorder all(tmp, tb.ns(1), "all", ""), one(tmp, tb.ns(1), "one", "--port 7011");
  ASSERT_TRUE(all.ready()) << all.err();
  ASSERT_TRUE(one.ready()) << one.err();
  for (int port : {7011, 7012}) {
    auto c = testutil::run(
        "ip netns exec " + tb.ns(1) + " " + netload() + " client tcp 10.77.2.2 " + std::to_string(port) + " 50", tmp);
    ASSERT_EQ(c.status, 0) << c.err;
  }
  EXPECT_EQ(s1.wait(20), 0);
  EXPECT_EQ(s2.wait(20), 0);
  EXPECT_EQ(one.stop(), 0) << one.err();
  EXPECT_EQ(all.stop(), 0) << all.err();
  NetTrace ta = load(all.dir), to = load(one.dir);
  expect_accounted(ta, "unfiltered");
  expect_accounted(to, "--port 7011");
  auto on_port = [](uint16_t p) { return [p](const cp_net_rec& r) { return r.sport == p || r.dport == p; }; };
  auto want = keys(ta, on_port(7011));
  EXPECT_GT(want.size(), 100u);
  EXPECT_FALSE(keys(ta, on_port(7012)).empty()) << "the other port's traffic was not there to filter out";
  EXPECT_EQ(diff(keys(to, [](const cp_net_rec&) { return true; }), want), "");
}

namespace {
// Where cgroup v2 is mounted ("" when it is not).
// Two clients in node 1 (client 1 optionally inside cgroup `cg`), two recorders in
// node 1: unfiltered, and `filter` (-p PID of client 1, or --cgroup). The filtered
// trace must be exactly the unfiltered one restricted to client 1's flow: its socket
// events and the packets of its connection, nothing of client 2.
void owner_filter_test(NetCapture_Env& env, const std::string& tag, const std::string& cg) {
  testbed::Testbed tb(tag, 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  const TempDir& tmp = env.tmp;
  Proc s1("ip netns exec " + tb.ns(2) + " " + netload() + " server tcp 10.77.2.2 7021", tmp / "s1.out", tmp / "s1.err");
  Proc s2("ip netns exec " + tb.ns(2) + " " + netload() + " server tcp 10.77.2.2 7022", tmp / "s2.out", tmp / "s2.err");
  ASSERT_TRUE(s1.wait_for("ready", 10) && s2.wait_for("ready", 10));
  std::string go = tmp / "go";
  std::string cmd1 = "ip netns exec " + tb.ns(1) + " " + netload() + " client tcp 10.77.2.2 7021 80 " + go;
  if (!cg.empty()) cmd1 = "sh -c " + testbed::shq("echo $$ > " + cg + "/cgroup.procs && exec " + cmd1);
  Proc c1(cmd1, tmp / "c1.out", tmp / "c1.err");
  Proc c2("ip netns exec " + tb.ns(1) + " " + netload() + " client tcp 10.77.2.2 7022 80 " + go, tmp / "c2.out",
          tmp / "c2.err");
  ASSERT_TRUE(c1.wait_for("pid", 10) && c2.wait_for("pid", 10)) << testutil::read_file(c1.err_path);
  int pid1 = 0;
  sscanf(testutil::read_file(c1.out_path).c_str(), "pid %d", &pid1);
  ASSERT_GT(pid1, 0);
  Recorder all(tmp, tb.ns(1), "all", ""),
      // `ip netns exec` remounts /sys, hiding the cgroup tree: the --cgroup recorder
      // runs in the host namespace and names the node with --netns PATH instead.
      mine(tmp, tb.ns(1), "mine", cg.empty() ? "-p " + std::to_string(pid1) : "--cgroup " + cg, cg.empty());
  ASSERT_TRUE(all.ready()) << all.err();
  ASSERT_TRUE(mine.ready()) << mine.err();
  testutil::run("touch " + go, tmp);
  EXPECT_EQ(c1.wait(30), 0);
  EXPECT_EQ(c2.wait(30), 0);
  if (cg.empty()) {
    EXPECT_EQ(mine.p->wait(10), 0) << "the -p recorder stops when its process exits: " << mine.err();
  } else {
    EXPECT_EQ(mine.stop(), 0) << mine.err();
  }
  EXPECT_EQ(all.stop(), 0) << all.err();
  int port1 = 0;
  long sent1 = 0;
  std::string o1 = testutil::read_file(c1.out_path);
  sscanf(o1.c_str() + o1.find("sent"), "sent %ld %d", &sent1, &port1);
  ASSERT_GT(port1, 0);
  NetTrace ta = load(all.dir), tm = load(mine.dir);
  expect_accounted(tm, "filtered");
  uint16_t p1 = uint16_t(port1);
  auto flow1 = [p1](const cp_net_rec& r) {
    return (r.kind == CP_NET_PKT_RX ? r.dport : r.sport) == p1 && (r.proto == 6);
  };
  auto want = keys(ta, flow1);
  EXPECT_GT(want.size(), 80u);
  EXPECT_EQ(diff(keys(tm, [](const cp_net_rec&) { return true; }), want), "");
  for (const NetEvent& e : tm.ev) EXPECT_EQ(e.r.pid, uint32_t(pid1));
  EXPECT_EQ(sum_len(select(tm, CP_NET_SOCK_SEND, 6, p1, 7021, true)), sent1);
}

}  // namespace

// -p PID: the socket events of PID and the packets of its flows (its transmissions,
// and receives of flows it had used), nothing of another process in the same node.
TEST_F(NetCapture, PidFilterKeepsExactlyThatProcessFlows) { owner_filter_test(*this, "npid", ""); }

// --cgroup: the same with client 1 alone in a fresh cgroup v2 directory.
TEST_F(NetCapture, CgroupFilterKeepsExactlyThatCgroupFlows) {
  std::string root = cgroup2_mount();
  if (root.empty()) GTEST_SKIP() << "SKIPPED: no cgroup v2 hierarchy mounted";
  std::string cg = root + "/cptracenet" + std::to_string(getpid());
  ASSERT_EQ(mkdir(cg.c_str(), 0755), 0) << cg << ": " << strerror(errno);
  owner_filter_test(*this, "ncgr", cg);
  EXPECT_EQ(rmdir(cg.c_str()), 0) << cg << ": " << strerror(errno);
}

// --gso: the veths keep 64 KiB super-packets. Segments are recorded at the device
// as the stack hands them over (one record per super-packet, gso_segs/gso_size
// set); the receiving node sees the same skb, so byte ranges still match 1:1.
TEST_F(NetCapture, TcpGsoSuperPacketsMatchByByteRange) {
  testbed::Testbed tb("ngso", 2, "--gso");
  ASSERT_TRUE(tb.ok()) << tb.output();
  PairRun r = run_pair(tb, tmp, true, "10.77.2.2", 7006, kTcpMessages);
  expect_only_own(r, "10.77.1.2", "10.77.2.2");
  check_tcp(r, 7006, false, 0);
  int gso = 0;
  for (const NetEvent& e : select(r.a, CP_NET_PKT_TX, 6, r.cport, 7006, true)) {
    if (e.r.gso_segs > 1) {
      ++gso;
      EXPECT_GT(e.r.len, e.r.gso_size) << "a GSO packet carries more than one MSS";
    }
  }
  printf("      %d super-packets (gso_segs > 1) among the transmitted segments\n", gso);
}

// Socket events place the application's bytes in the stream: the server's recv
// ranges [seq, seq+len) tile exactly the client's send ranges, including the
// last recv, which also consumes the client's FIN (write, then shutdown): its
// seq is that of its first byte, not one more (the FIN's sequence number).
TEST_F(NetCapture, TcpRecvRangesTileSendRangesThroughTheFin) {
  testbed::Testbed tb("nfin", 2, "");
  ASSERT_TRUE(tb.ok()) << tb.output();
  const int port = 7009, count = 20;  // a few KB: all of it and the FIN fit the receive queue
  // The server waits 500 ms after accept(), so its last read() finds the data
  // and the FIN queued together and consumes both.
  Proc server("ip netns exec " + tb.ns(2) + " " + netload() + " server tcp 10.77.2.2 " + std::to_string(port) + " " +
                  std::to_string(count) + " 500",
              tmp / "server.out", tmp / "server.err");
  ASSERT_TRUE(server.wait_for("ready", 10)) << testutil::read_file(server.err_path);
  Recorder ra(tmp, tb.ns(1), "a", ""), rb(tmp, tb.ns(2), "b", "");
  ASSERT_TRUE(ra.ready()) << ra.err();
  ASSERT_TRUE(rb.ready()) << rb.err();
  auto c = testutil::run("ip netns exec " + tb.ns(1) + " " + netload() + " client tcp 10.77.2.2 " +
                             std::to_string(port) + " " + std::to_string(count),
                         tmp);
  ASSERT_EQ(c.status, 0) << c.err;
  ASSERT_EQ(server.wait(30), 0);
  EXPECT_EQ(ra.stop(), 0) << ra.err();
  EXPECT_EQ(rb.stop(), 0) << rb.err();
  long sent = 0;
  int cport = 0;
  ASSERT_EQ(sscanf(c.out.c_str() + c.out.find("sent"), "sent %ld %d", &sent, &cport), 2) << c.out;
  NetTrace a = load(ra.dir), b = load(rb.dir);
  auto sends = select(a, CP_NET_SOCK_SEND, 6, cport, port, true);
  auto recvs = select(b, CP_NET_SOCK_RECV, 6, port, cport, true);
  ASSERT_FALSE(sends.empty());
  ASSERT_FALSE(recvs.empty());
  auto tile = [](std::vector<NetEvent> v, const char* what) {
    std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.r.ktime_ns < y.r.ktime_ns; });
    uint32_t first = v.front().r.seq, next = first;
    for (const NetEvent& e : v) {
      EXPECT_EQ(e.r.seq, next) << what << ": a range that does not start where the previous one ended (offset "
                               << uint32_t(next - first) << ", len " << e.r.len << ")";
      next = e.r.seq + e.r.len;
    }
    return std::pair{first, next};
  };
  auto [s0, s1] = tile(sends, "send");
  auto [r0, r1] = tile(recvs, "recv");
  EXPECT_EQ(r0, s0) << "the first received byte is not the first sent byte";
  EXPECT_EQ(r1, s1) << "the received stream does not end where the sent one does";
  EXPECT_EQ(long(uint32_t(s1 - s0)), sent);
}
