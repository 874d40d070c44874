// SO_TIMESTAMPING sockets and stamp conversion: see kernel_timestamps.h.
#include "sync/kernel_timestamps.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <linux/net_tstamp.h>
#include <netdb.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "clock/clock_map.h"
#include "clock/clock_now.h"
#include "os/time_units.h"

namespace cptrace {
namespace {

uint64_t ts_ns(const timespec& t) { return uint64_t(timespec_ns(t)); }

}  // namespace

uint64_t rdtsc_now() { return __rdtsc(); }

RealMonoOffset sample_real_mono_offset(int brackets) {
  // m1 <= mono(at the realtime read) <= m2, realtime = mono + off exactly (both
  // come from the same clocksource read), so off is in [r - m2, r - m1].
  RealMonoOffset o{INT64_MIN, INT64_MAX};
  for (int i = 0; i < brackets; ++i) {
    int64_t m1 = clock_now_ns(CLOCK_MONOTONIC);
    int64_t r = clock_now_ns(CLOCK_REALTIME);
    int64_t m2 = clock_now_ns(CLOCK_MONOTONIC);
    o.lo = std::max(o.lo, r - m2);
    o.hi = std::min(o.hi, r - m1);
  }
  if (o.lo > o.hi) std::swap(o.lo, o.hi);  // a step during the brackets: report it as wide
  return o;
}

void StampClock::sample_before() {
  off_before = sample_real_mono_offset();
  before = sample_clock_point(3);
}

void StampClock::sample_after() {
  after = sample_clock_point(3);
  off_after = sample_real_mono_offset();
}

bool StampClock::consistent() const {
  // The offset is one integer between steps: both brackets must contain it.
  return std::max(off_before.lo, off_after.lo) <= std::min(off_before.hi, off_after.hi) && after.tsc > before.tsc &&
         after.mono_ns > before.mono_ns;
}

uint64_t StampClock::realtime_to_tsc(uint64_t rt_ns) const {
  int64_t lo = std::max(off_before.lo, off_after.lo), hi = std::min(off_before.hi, off_after.hi);
  int64_t off = lo <= hi ? lo + (hi - lo) / 2 : off_before.mid();
  uint64_t mono = uint64_t(int64_t(rt_ns) - off);
  ClockMap m({before, after});
  uint64_t tsc = m.points().size() == 2 ? m.mono_to_tsc(mono) : before.tsc;
  return user_tsc(tsc);
}

int open_stamped_udp(int family, bool tx, bool rx) {
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("UDP socket: {}", strerror(errno)));
  unsigned flags = SOF_TIMESTAMPING_SOFTWARE;
  if (tx) flags |= SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY | SOF_TIMESTAMPING_OPT_ID;
  if (rx) flags |= SOF_TIMESTAMPING_RX_SOFTWARE;
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) {
    int e = errno;
    close(fd);
    throw std::runtime_error(fmt::format("SO_TIMESTAMPING (software stamps): {}", strerror(e)));
  }
  if (!rx) {
    // A send-only socket drops whatever arrives (a socket filter returning 0):
    // datagrams queued on it would count against the same receive buffer as its
    // transmit stamps, so anyone sending junk to its port could make the kernel
    // drop every stamp (seen: 490 of 600 rounds without kernel stamps).
    sock_filter drop_all{BPF_RET | BPF_K, 0, 0, 0};
    sock_fprog prog{1, &drop_all};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
      int e = errno;
      close(fd);
      throw std::runtime_error(fmt::format("SO_ATTACH_FILTER (drop incoming on a send-only socket): {}", strerror(e)));
    }
  }
  return fd;
}

ssize_t recv_stamped(int fd, void* buf, size_t len, sockaddr_storage* from, socklen_t* fromlen, uint64_t* rt_ns,
                     int flags) {
  alignas(cmsghdr) char ctl[512];
  iovec iov{buf, len};
  msghdr mh{};
  mh.msg_name = from;
  mh.msg_namelen = from ? sizeof(*from) : 0;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  ssize_t n = recvmsg(fd, &mh, flags);
  if (n < 0) return n;
  if (fromlen) *fromlen = mh.msg_namelen;
  *rt_ns = 0;
  if (mh.msg_flags & MSG_TRUNC) return ssize_t(len) + 1;  // longer than any valid message
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
      scm_timestamping tss;
      memcpy(&tss, CMSG_DATA(c), sizeof tss);
      *rt_ns = ts_ns(tss.ts[0]);
    }
  return n;
}

std::optional<uint64_t> read_tx_stamp(int fd, uint32_t id, int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    alignas(cmsghdr) char ctl[512];
    char data[64];
    iovec iov{data, sizeof data};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    ssize_t n = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (n >= 0) {
      std::optional<uint64_t> stamp;
      std::optional<uint32_t> key;
      for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
          scm_timestamping tss;
          memcpy(&tss, CMSG_DATA(c), sizeof tss);
          stamp = ts_ns(tss.ts[0]);
        } else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                   (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
          sock_extended_err ee;
          memcpy(&ee, CMSG_DATA(c), sizeof ee);
          if (ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING) key = ee.ee_data;
        }
      }
      if (stamp && key && *key == id && *stamp) return stamp;
      continue;  // an older stamp (or an ICMP error): keep reading
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return std::nullopt;
    int left =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count());
    if (left <= 0) return std::nullopt;
    pollfd p{fd, 0, 0};  // POLLERR is always reported
    poll(&p, 1, std::min(left, 10));
  }
}

sockaddr_storage parse_endpoint(const std::string& text, uint16_t default_port, const std::string& what,
                                socklen_t* len) {
  std::string host = text, port = std::to_string(default_port);
  auto bad = [&](const std::string& why) { return std::invalid_argument(fmt::format("{} '{}': {}", what, text, why)); };
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) throw bad("missing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("expected ':' after ']'");
      port = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    auto c = text.find(':');
    host = text.substr(0, c);
    port = text.substr(c + 1);
  }
  // from_chars, not stoul: a digit string too long for unsigned long must be a
  // clear "bad port", not an out_of_range escaping from a parser.
  unsigned port_num = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), port_num);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || port_num > 65535)
    throw bad("bad port '" + port + "'");
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) throw bad(std::string("cannot resolve: ") + gai_strerror(rc));
  sockaddr_storage ss{};
  memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

std::string endpoint_string(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
    return fmt::format("{}:{}", buf, ntohs(s->sin_port));
  }
  auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
  inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
  return fmt::format("[{}]:{}", buf, ntohs(s->sin6_port));
}

socklen_t sockaddr_len(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

}  // namespace cptrace
