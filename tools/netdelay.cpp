// netdelay — the delaying forwarding element of the namespace testbed (tools/testbed.sh).
//
// It runs inside the testbed's router namespace, where the kernel does NOT forward
// (forwarding sysctls are 0 and an nftables forward chain drops everything). For every
// router-side link it opens one AF_PACKET socket, receives every frame a node sends to
// the router's MAC, looks the destination IP up in the links' subnets, and transmits
// the frame (Ethernet addresses rewritten, TTL / hop limit decremented) on the
// destination link no earlier than
//
//     rx_time + delay + from_us(ingress link) + to_us(egress link) + U[0, jitter]
//
// and never before the previous packet of the same (ingress, egress) path, so a path
// is FIFO: jitter never reorders packets of one flow. rx_time is the kernel's receive
// timestamp of the frame (so the forwarder's own wake-up latency does not add to the
// delay); the forwarder sleeps until `spin` microseconds before the next deadline and
// busy-waits the rest, so the transmit lateness is a few microseconds.
//
// Frames are received and sent with PACKET_VNET_HDR: the checksum-offload state (and
// any GSO information) of the node's skb travels with the frame, so TCP/UDP checksums
// that the sender's stack left to "hardware" stay valid on the receiving node.
//
// Frames the forwarder does not route (ARP, neighbour discovery, multicast, anything
// addressed to one of the router's own addresses, anything not in a link's subnet) are
// left to the router namespace's kernel, which answers for its own addresses only.
//
// Packet loss is not done here: tools/testbed.sh installs nftables rules on the egress
// hook of the router-side interfaces, which also see the frames this program sends.
//
// Usage: netdelay [options] --link IF,PEER_MAC,V4NET/LEN,V6NET/LEN,TO_US,FROM_US ...
//   --delay US        base one-way delay added to every forwarded packet (default 0)
//   --jitter US       extra uniform delay in [0, US] per packet (default 0)
//   --seed N          jitter PRNG seed (default: time based)
//   --spin US         busy-wait window before a deadline (default 30 with --rt, else 60)
//   --max-packets N   queue limit in packets (default 200000); beyond it: drop
//   --max-bytes N     queue limit in bytes (default 256 MiB); beyond it: drop
//   --stats FILE      counters and lateness percentiles, written on SIGUSR1 and at exit
//   --ready FILE      created once every socket is bound (start-up handshake)
//   --rt PRIO         run SCHED_FIFO at PRIO (default: normal scheduling). Only one core can
//                     be taken: the thread sleeps whenever nothing is due within --spin, and
//                     the kernel's RT throttling still applies.
//   --no-kernel-ts    use the forwarder's own clock at recv() as the receive time
// SIGTERM / SIGINT: exit. The program also exits when one of its links disappears.

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

// struct virtio_net_hdr (linux/virtio_net.h is not valid C++): flags, gso_type, hdr_len,
// gso_size, csum_start, csum_offset. Passed through untouched.
constexpr size_t kVnet = 10;
constexpr size_t kRxBuf = 256 * 1024;  // GSO frames can be up to 64 KiB (more with BIG TCP)

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;

int64_t now_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
int64_t mono_ns() { return now_ns(CLOCK_MONOTONIC); }

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "netdelay: %s: %s\n", what, strerror(errno));
  exit(1);
}
[[noreturn]] void usage(const char* msg) {
  fprintf(stderr,
          "netdelay: %s\n"
          "usage: netdelay [--delay US] [--jitter US] [--seed N] [--spin US] [--max-packets N]\n"
          "                [--max-bytes N] [--stats FILE] [--ready FILE] [--rt PRIO] [--no-kernel-ts]\n"
          "                --link IF,PEER_MAC,V4NET/LEN,V6NET/LEN,TO_US,FROM_US [--link ...]\n",
          msg);
  exit(2);
}

struct Link {
  std::string ifname;
  int ifindex = 0;
  int fd = -1;
  std::array<uint8_t, 6> mac{};  // our (router-side) MAC
  std::array<uint8_t, 6> peer_mac{};  // the node's MAC
  uint32_t v4net = 0, v4mask = 0;  // host byte order
  std::array<uint8_t, 16> v6net{};
  int v6len = 0;
  int64_t to_ns = 0, from_ns = 0;
};

struct Pkt {
  int64_t due;
  uint64_t seq;
  int64_t rx;
  int out;
  uint32_t len;
  uint8_t* data;
};
struct Later {
  bool operator()(const Pkt& a, const Pkt& b) const { return a.due != b.due ? a.due > b.due : a.seq > b.seq; }
};

struct Stats {
  uint64_t rx = 0, fwd = 0, ignored = 0, drop_ttl = 0, drop_queue = 0, drop_tx = 0, drop_short = 0, truncated = 0,
           ts_fallback = 0;
  uint64_t max_queue = 0;
  // transmit lateness (actual send time - due), 1 us buckets up to 10 ms
  std::vector<uint64_t> late_hist = std::vector<uint64_t>(10001, 0);
  int64_t late_max = 0;
};

bool parse_mac(const std::string& s, std::array<uint8_t, 6>& m) {
  unsigned v[6];
  if (sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return false;
  for (int i = 0; i < 6; i++) {
    if (v[i] > 255) return false;
    m[i] = uint8_t(v[i]);
  }
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  for (;;) {
    size_t q = s.find(sep, p);
    out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

int64_t parse_us(const std::string& s, const char* what) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || *end || v < 0 || v > 60e6) usage((std::string("bad ") + what + ": " + s).c_str());
  return int64_t(v * 1000.0 + 0.5);
}

Link parse_link(const std::string& spec) {
  auto f = split(spec, ',');
  if (f.size() != 6) usage(("bad --link " + spec).c_str());
  Link l;
  l.ifname = f[0];
  if (!parse_mac(f[1], l.peer_mac)) usage(("bad MAC in --link " + spec).c_str());
  auto v4 = split(f[2], '/');
  in_addr a4;
  if (v4.size() != 2 || inet_pton(AF_INET, v4[0].c_str(), &a4) != 1) usage(("bad IPv4 net " + f[2]).c_str());
  int len4 = atoi(v4[1].c_str());
  if (len4 < 1 || len4 > 32) usage(("bad IPv4 prefix " + f[2]).c_str());
  l.v4mask = len4 == 32 ? 0xffffffffu : ~(0xffffffffu >> len4);
  l.v4net = ntohl(a4.s_addr) & l.v4mask;
  auto v6 = split(f[3], '/');
  if (v6.size() != 2 || inet_pton(AF_INET6, v6[0].c_str(), l.v6net.data()) != 1)
    usage(("bad IPv6 net " + f[3]).c_str());
  l.v6len = atoi(v6[1].c_str());
  if (l.v6len < 1 || l.v6len > 128) usage(("bad IPv6 prefix " + f[3]).c_str());
  l.to_ns = parse_us(f[4], "TO_US");
  l.from_ns = parse_us(f[5], "FROM_US");
  return l;
}

bool v6_in(const uint8_t* a, const Link& l) {
  int bits = l.v6len;
  for (int i = 0; i < 16 && bits > 0; i++, bits -= 8) {
    uint8_t m = bits >= 8 ? 0xff : uint8_t(0xff << (8 - bits));
    if ((a[i] & m) != (l.v6net[i] & m)) return false;
  }
  return true;
}

void on_signal(int s) {
  if (s == SIGUSR1)
    g_dump = 1;
  else
    g_stop = 1;
}

void write_stats(const char* path, const Stats& st, size_t queued) {
  if (!path) return;
  std::string tmp = std::string(path) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return;
  uint64_t n = 0;
  for (auto c : st.late_hist) n += c;
  auto pct = [&](double p) -> long {
    if (!n) return -1;
    uint64_t want = uint64_t(p * double(n - 1)), acc = 0;
    for (size_t i = 0; i < st.late_hist.size(); i++) {
      acc += st.late_hist[i];
      if (acc > want) return long(i);
    }
    return long(st.late_hist.size() - 1);
  };
  fprintf(f,
          "rx=%" PRIu64 "\nforwarded=%" PRIu64 "\nignored=%" PRIu64 "\ndrop_ttl=%" PRIu64 "\ndrop_queue_full=%" PRIu64
          "\ndrop_tx_error=%" PRIu64 "\ndrop_short=%" PRIu64 "\ndrop_truncated=%" PRIu64 "\nrx_ts_fallback=%" PRIu64
          "\nqueued=%zu\nmax_queued=%" PRIu64
          "\nlate_us_p50=%ld\nlate_us_p99=%ld\nlate_us_p999=%ld\nlate_us_max=%.1f\n",
          st.rx, st.fwd, st.ignored, st.drop_ttl, st.drop_queue, st.drop_tx, st.drop_short, st.truncated,
          st.ts_fallback, queued, st.max_queue, pct(0.5), pct(0.99), pct(0.999), double(st.late_max) / 1000.0);
  fclose(f);
  rename(tmp.c_str(), path);
}

struct Options {
  std::vector<Link> links;
  int64_t delay_ns = 0, jitter_ns = 0, spin_ns = -1;  // -1: 30 us under SCHED_FIFO, else 60 us
  uint64_t seed = uint64_t(now_ns(CLOCK_REALTIME));
  uint64_t max_pkts = 200000, max_bytes = 256ull << 20;
  std::string stats_file, ready_file;
  int rt_prio = 0;
  bool kernel_ts = true;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--link")
      o.links.push_back(parse_link(val()));
    else if (a == "--delay")
      o.delay_ns = parse_us(val(), "--delay");
    else if (a == "--jitter")
      o.jitter_ns = parse_us(val(), "--jitter");
    else if (a == "--spin")
      o.spin_ns = parse_us(val(), "--spin");
    else if (a == "--seed")
      o.seed = strtoull(val().c_str(), nullptr, 0);
    else if (a == "--max-packets")
      o.max_pkts = strtoull(val().c_str(), nullptr, 0);
    else if (a == "--max-bytes")
      o.max_bytes = strtoull(val().c_str(), nullptr, 0);
    else if (a == "--stats")
      o.stats_file = val();
    else if (a == "--ready")
      o.ready_file = val();
    else if (a == "--rt")
      o.rt_prio = atoi(val().c_str());
    else if (a == "--no-kernel-ts")
      o.kernel_ts = false;
    else if (a == "-h" || a == "--help")
      usage("help");
    else
      usage(("unknown argument " + a).c_str());
  }
  if (o.links.size() < 2) usage("need at least two --link");
  if (o.links.size() > 256) usage("too many links");
  return o;
}

// The router's own addresses: frames for them are the kernel's business.
struct LocalAddrs {
  std::vector<uint32_t> v4;
  std::vector<std::array<uint8_t, 16>> v6;
};

LocalAddrs local_addresses() {
  LocalAddrs l;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) die("getifaddrs");
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr) continue;
    if (p->ifa_addr->sa_family == AF_INET)
      l.v4.push_back(ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr));
    else if (p->ifa_addr->sa_family == AF_INET6) {
      std::array<uint8_t, 16> x;
      memcpy(x.data(), &reinterpret_cast<sockaddr_in6*>(p->ifa_addr)->sin6_addr, 16);
      l.v6.push_back(x);
    }
  }
  freeifaddrs(ifa);
  return l;
}

// One AF_PACKET socket on the link's interface, with virtio-net headers and
// (unless --no-kernel-ts) the kernel's receive stamps; learns our MAC on it.
void open_link(Link& l, bool kernel_ts) {
  l.ifindex = int(if_nametoindex(l.ifname.c_str()));
  if (!l.ifindex) die(("no interface " + l.ifname).c_str());
  l.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (l.fd < 0) die("socket(AF_PACKET)");
  int one = 1;
  if (setsockopt(l.fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one)) die("PACKET_VNET_HDR");
  if (setsockopt(l.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one)) die("PACKET_IGNORE_OUTGOING");
  if (kernel_ts && setsockopt(l.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one)) die("SO_TIMESTAMPNS");
  int buf = 8 << 20;
  if (setsockopt(l.fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf))
    setsockopt(l.fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(l.fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf))
    setsockopt(l.fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = l.ifindex;
  if (bind(l.fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll)) die(("bind " + l.ifname).c_str());
  ifreq ifr{};
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", l.ifname.c_str());
  if (ioctl(l.fd, SIOCGIFHWADDR, &ifr)) die("SIOCGIFHWADDR");
  memcpy(l.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
}

void open_links(std::vector<Link>& links, bool kernel_ts) {
  for (auto& l : links) open_link(l, kernel_ts);
  // Frames queued in the socket before bind() completed may come from any interface.
  for (auto& l : links) {
    static uint8_t junk[kRxBuf];
    while (recv(l.fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
    }
  }
}

// Precise wake-ups, SCHED_FIFO when asked, memory locked, the signals, and the
// ready file; the spin window follows from whether SCHED_FIFO was granted.
void setup_process(Options& o) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // precise hrtimer wake-ups
  bool rt = false;
  if (o.rt_prio > 0) {
    sched_param sp{};
    sp.sched_priority = o.rt_prio;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
      rt = true;
    else
      perror("netdelay: SCHED_FIFO unavailable, continuing with normal scheduling");
  }
  // A SCHED_FIFO thread wakes within a few us of its timer; a normal one may need far more.
  if (o.spin_ns < 0) o.spin_ns = rt ? 30000 : 60000;
  mlockall(MCL_CURRENT);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);

  if (!o.ready_file.empty()) {
    int fd = open(o.ready_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dprintf(fd, "%d\n", int(getpid()));
      close(fd);
    }
  }
}

// The forwarding loop's state: the links, the queue of delayed frames ordered by
// due time, and the counters.
class Forwarder {
 public:
  Forwarder(const Options& o, LocalAddrs local)
      : o_(o),
        links_(o.links),
        n_(links_.size()),
        local_(std::move(local)),
        pfds_(n_),
        last_due_(n_ * n_, 0),
        rng_(o.seed),
        jit_(0, o.jitter_ns),
        rxbuf_(kVnet + kRxBuf) {
    for (size_t i = 0; i < n_; i++) pfds_[i] = {links_[i].fd, POLLIN, 0};
  }

  // Until SIGTERM/SIGINT or a link gone; 3 when a link went away, else 0.
  int run();

 private:
  int64_t rx_time(msghdr& mh, int64_t mono);
  int route(uint8_t* eth, size_t r, size_t in);
  void receive(size_t in);
  void transmit(const Pkt& p, int64_t now);
  void poll_and_receive(int timeout_ms_or_neg, const timespec* ts);
  void teardown();

  const Options& o_;
  std::vector<Link> links_;
  const size_t n_;
  const LocalAddrs local_;
  std::vector<pollfd> pfds_;
  std::priority_queue<Pkt, std::vector<Pkt>, Later> heap_;
  std::vector<int64_t> last_due_;  // FIFO per (ingress, egress) path
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int64_t> jit_;
  Stats st_;
  uint64_t seq_ = 0, queued_bytes_ = 0;
  std::vector<uint8_t> rxbuf_;
  bool fatal_ = false;
};

// The frame's receive time on CLOCK_MONOTONIC: the kernel's stamp when it is
// plausible, else `mono` (the forwarder's own clock at recv()).
int64_t Forwarder::rx_time(msghdr& mh, int64_t mono) {
  int64_t rx = mono;
  if (!o_.kernel_ts) return rx;
  bool ok = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts;
      memcpy(&ts, CMSG_DATA(c), sizeof ts);
      int64_t real_ts = int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
      int64_t off = now_ns(CLOCK_REALTIME) - mono_ns();
      int64_t cand = real_ts - off;
      // Reject anything implausible (e.g. a sender's monotonic delivery time).
      if (cand <= mono + 1000 && mono - cand < 1000000000LL) {
        rx = std::min(cand, mono);
        ok = true;
      }
    }
  }
  if (!ok) st_.ts_fallback++;
  return rx;
}

// The egress link of a frame of `r` bytes (virtio-net header included) that
// came in on `in`, its TTL / hop limit decremented; -1 when it is not ours to
// forward (counted).
int Forwarder::route(uint8_t* eth, size_t r, size_t in) {
  uint8_t* ip = eth + ETH_HLEN;
  uint16_t proto = uint16_t(eth[12] << 8 | eth[13]);
  size_t iplen = r - kVnet - ETH_HLEN;
  int out = -1;
  if (proto == ETH_P_IP) {
    if ((ip[0] >> 4) != 4) {
      st_.drop_short++;
      return -1;
    }
    uint32_t dst = uint32_t(ip[16]) << 24 | uint32_t(ip[17]) << 16 | uint32_t(ip[18]) << 8 | ip[19];
    if (std::find(local_.v4.begin(), local_.v4.end(), dst) != local_.v4.end()) {
      st_.ignored++;
      return -1;
    }
    for (size_t k = 0; k < n_; k++)
      if ((dst & links_[k].v4mask) == links_[k].v4net) {
        out = int(k);
        break;
      }
    if (out < 0 || size_t(out) == in) {
      st_.ignored++;
      return -1;
    }
    if (ip[8] <= 1) {
      st_.drop_ttl++;
      return -1;
    }
    ip[8]--;
    uint32_t check = uint32_t(ip[10]) << 8 | ip[11];
    check += 0x0100;  // incremental update for TTL-1 (as the kernel's ip_decrease_ttl)
    check = (check + (check >= 0xffff)) & 0xffff;
    ip[10] = uint8_t(check >> 8);
    ip[11] = uint8_t(check);
  } else if (proto == ETH_P_IPV6) {
    if (iplen < 40 || (ip[0] >> 4) != 6) {
      st_.drop_short++;
      return -1;
    }
    const uint8_t* dst = ip + 24;
    bool local = false;
    for (auto& a : local_.v6)
      if (memcmp(a.data(), dst, 16) == 0) {
        local = true;
        break;
      }
    if (local || dst[0] == 0xff) {
      st_.ignored++;
      return -1;
    }
    for (size_t k = 0; k < n_; k++)
      if (v6_in(dst, links_[k])) {
        out = int(k);
        break;
      }
    if (out < 0 || size_t(out) == in) {
      st_.ignored++;
      return -1;
    }
    if (ip[7] <= 1) {
      st_.drop_ttl++;
      return -1;
    }
    ip[7]--;
  } else {
    st_.ignored++;  // ARP etc.: the router kernel answers for itself
    return -1;
  }
  return out;
}

// Up to 64 frames from link `in`, each routed and queued until it is due.
void Forwarder::receive(size_t in) {
  Link& L = links_[in];
  for (int batch = 0; batch < 64; batch++) {
    sockaddr_ll from{};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(timespec)) + 64];
    iovec iov{rxbuf_.data(), rxbuf_.size()};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t r = recvmsg(L.fd, &mh, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      if (errno == ENETDOWN || errno == ENXIO || errno == ENODEV) {
        fprintf(stderr, "netdelay: link %s went away, exiting\n", L.ifname.c_str());
        fatal_ = true;
      }
      return;
    }
    int64_t mono = mono_ns();
    st_.rx++;
    int64_t rx = rx_time(mh, mono);
    if (size_t(r) > rxbuf_.size() || (mh.msg_flags & MSG_TRUNC)) {
      st_.truncated++;
      continue;
    }
    if (from.sll_pkttype != PACKET_HOST) {
      st_.ignored++;
      continue;
    }
    if (size_t(r) < kVnet + ETH_HLEN + 20) {
      st_.drop_short++;
      continue;
    }
    uint8_t* eth = rxbuf_.data() + kVnet;
    int out = route(eth, size_t(r), in);
    if (out < 0) continue;
    const Link& O = links_[size_t(out)];
    memcpy(eth, O.peer_mac.data(), 6);
    memcpy(eth + 6, O.mac.data(), 6);
    if (heap_.size() >= o_.max_pkts || queued_bytes_ + uint64_t(r) > o_.max_bytes) {
      st_.drop_queue++;
      continue;
    }
    int64_t due = rx + o_.delay_ns + L.from_ns + O.to_ns + (o_.jitter_ns ? jit_(rng_) : 0);
    int64_t& last = last_due_[in * n_ + size_t(out)];
    if (due < last) due = last;  // FIFO per path: jitter does not reorder
    last = due;
    auto* copy = static_cast<uint8_t*>(malloc(size_t(r)));
    if (!copy) {
      st_.drop_queue++;
      continue;
    }
    memcpy(copy, rxbuf_.data(), size_t(r));
    heap_.push(Pkt{due, seq_++, rx, out, uint32_t(r), copy});
    queued_bytes_ += uint64_t(r);
    st_.max_queue = std::max<uint64_t>(st_.max_queue, heap_.size());
  }
}

void Forwarder::transmit(const Pkt& p, int64_t now) {
  ssize_t w = send(links_[size_t(p.out)].fd, p.data, p.len, MSG_DONTWAIT);
  if (w != ssize_t(p.len))
    st_.drop_tx++;
  else
    st_.fwd++;
  int64_t late = now - p.due;
  if (late > st_.late_max) st_.late_max = late;
  size_t b = late <= 0 ? 0 : size_t(late / 1000);
  st_.late_hist[std::min(b, st_.late_hist.size() - 1)]++;
  queued_bytes_ -= p.len;
  free(p.data);
}

void Forwarder::poll_and_receive(int timeout_ms_or_neg, const timespec* ts) {
  int r = ts ? ppoll(pfds_.data(), n_, ts, nullptr) : poll(pfds_.data(), n_, timeout_ms_or_neg);
  if (r <= 0) return;
  for (size_t i = 0; i < n_; i++) {
    if (pfds_[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(pfds_[i].fd, SOL_SOCKET, SO_ERROR, &err, &el);
      if (err == ENETDOWN || err == ENXIO || err == ENODEV || (pfds_[i].revents & POLLNVAL)) {
        fprintf(stderr, "netdelay: link %s went away, exiting\n", links_[i].ifname.c_str());
        fatal_ = true;
      }
    }
    if (pfds_[i].revents & POLLIN) receive(i);
  }
}

int Forwarder::run() {
  const char* stats_path = o_.stats_file.empty() ? nullptr : o_.stats_file.c_str();
  while (!g_stop && !fatal_) {
    if (g_dump) {
      g_dump = 0;
      write_stats(stats_path, st_, heap_.size());
    }
    int64_t now = mono_ns();
    while (!heap_.empty() && heap_.top().due <= now) {
      Pkt p = heap_.top();
      heap_.pop();
      transmit(p, now);
      now = mono_ns();
    }
    if (heap_.empty()) {
      poll_and_receive(500, nullptr);
      continue;
    }
    int64_t wait = heap_.top().due - now;
    if (wait > o_.spin_ns) {
      int64_t sl = wait - o_.spin_ns;
      timespec ts{time_t(sl / 1000000000LL), long(sl % 1000000000LL)};
      poll_and_receive(0, &ts);
    } else {
      poll_and_receive(0, nullptr);  // spin: look at the sockets, then re-check the clock
    }
  }
  teardown();
  write_stats(stats_path, st_, 0);
  return fatal_ ? 3 : 0;
}

// Frames still queued are freed, not sent: the run is over (the final stats
// say queued=0).
void Forwarder::teardown() {
  while (!heap_.empty()) {
    free(heap_.top().data);
    heap_.pop();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  LocalAddrs local = local_addresses();
  open_links(o.links, o.kernel_ts);
  setup_process(o);
  return Forwarder(o, std::move(local)).run();
}
