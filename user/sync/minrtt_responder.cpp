// MinRTT responder: see minrtt_responder.h.
#include "sync/minrtt_responder.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <stdexcept>

#include <fmt/core.h>

#include "sync/kernel_timestamps.h"
#include "clock/clock_now.h"

namespace cptrace {
namespace {

// The source IP alone (not the port): a flooder cannot escape its bucket by
// changing ports. An IPv4 address seen through the dual-stack socket
// (::ffff:a.b.c.d) is the same source as a.b.c.d.
std::string source_key(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET)
    return std::string(reinterpret_cast<const char*>(&reinterpret_cast<const sockaddr_in*>(&a)->sin_addr), 4);
  const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) return std::string(reinterpret_cast<const char*>(&v6) + 12, 4);
  return std::string(reinterpret_cast<const char*>(&v6), 16);
}

void set_port(sockaddr_storage& a, uint16_t port) {
  if (a.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(port);
}

bool is_unspecified(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr == 0;
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr);
}

int bind_rx(const std::string& listen, sockaddr_storage& addr) {
  socklen_t len = 0;
  addr = parse_endpoint(listen, minrtt::kDefaultPort, "--listen", &len);
  int fd = open_stamped_udp(addr.ss_family, false, true);
  if (addr.ss_family == AF_INET6) {
    int off = 0;  // "[::]" serves IPv4 too
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int e = errno;
    close(fd);
    throw std::runtime_error(fmt::format("cannot bind {}: {}", endpoint_string(addr), strerror(e)));
  }
  return fd;
}

}  // namespace

uint64_t ResponderStats::rejected() const {
  return malformed + bad_version + bad_auth + replayed + rate_limited + unexpected;
}

nlohmann::json ResponderStats::to_json() const {
  return {
      {"received", received.load()},         {"answered", answered.load()},     {"followups", followups.load()},
      {"cookies", cookies.load()},           {"rejected", rejected()},          {"malformed", malformed.load()},
      {"bad_version", bad_version.load()},   {"bad_auth", bad_auth.load()},     {"replayed", replayed.load()},
      {"rate_limited", rate_limited.load()}, {"unexpected", unexpected.load()}, {"no_rx_stamp", no_rx_stamp.load()},
      {"no_tx_stamp", no_tx_stamp.load()},   {"clock_step", clock_step.load()}, {"send_errors", send_errors.load()}};
}

std::string ResponderStats::line() const {
  return fmt::format(
      "received {} answered {} cookies {} rejected {} (malformed {} bad_version {} bad_auth {} replayed {} "
      "rate_limited {} unexpected {}) no_rx_stamp {} no_tx_stamp {} clock_step {}",
      received.load(), answered.load(), cookies.load(), rejected(), malformed.load(), bad_version.load(),
      bad_auth.load(), replayed.load(), rate_limited.load(), unexpected.load(), no_rx_stamp.load(), no_tx_stamp.load(),
      clock_step.load());
}

Responder::Responder(ResponderOptions opt) : opt_(std::move(opt)), session_(minrtt::random_session()) {
  if (opt_.node.empty() || opt_.node.size() > minrtt::kMaxNodeName)
    throw std::invalid_argument(fmt::format("--node '{}': 1..{} bytes", opt_.node, minrtt::kMaxNodeName));
  sockaddr_storage addr{};
  if (!opt_.listen.empty()) {
    rx_ = bind_rx(opt_.listen, addr);
  } else {
    try {
      rx_ = bind_rx(fmt::format("[::]:{}", minrtt::kDefaultPort), addr);
    } catch (const std::runtime_error&) {  // no IPv6 here
      rx_ = bind_rx(fmt::format("0.0.0.0:{}", minrtt::kDefaultPort), addr);
    }
  }
  tx_ = open_stamped_udp(addr.ss_family, true, false);
  if (addr.ss_family == AF_INET6) {
    int off = 0;
    setsockopt(tx_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  if (!is_unspecified(addr)) {  // replies leave from the address we were told to bind
    sockaddr_storage src = addr;
    set_port(src, 0);
    if (bind(tx_, reinterpret_cast<sockaddr*>(&src), sockaddr_len(src)) != 0)
      throw std::runtime_error(
          fmt::format("cannot bind reply socket to {}: {}", endpoint_string(src), strerror(errno)));
  }
  total_ = {opt_.total_hz / 10, mono_ns()};
  for (const sockaddr_storage& a : opt_.allow) allow_.insert(source_key(a));
}

Responder::~Responder() {
  stop();
  if (rx_ >= 0) close(rx_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (tx_ >= 0) close(tx_);
}

std::string Responder::local_address() const {
  sockaddr_storage a{};
  socklen_t l = sizeof a;
  getsockname(rx_, reinterpret_cast<sockaddr*>(&a), &l);
  return endpoint_string(a);
}

void Responder::start() {
  if (stop_fd_ < 0) stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) throw std::runtime_error(fmt::format("MinRTT responder: eventfd: {}", strerror(errno)));
  uint64_t v;
  (void)!read(stop_fd_, &v, sizeof v);  // a stop() before this start() is over
  thread_ = std::thread([this] { run(); });
}

void Responder::stop() {
  uint64_t one = 1;
  if (thread_.joinable()) {
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
}

void Responder::run() {
  for (;;) {
    pollfd p[2] = {{rx_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int n = poll(p, 2, -1);
    if (n < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (p[0].revents) serve_one();
  }
}

bool Responder::allow(const sockaddr_storage& from, int64_t now) {
  auto refill = [&](Bucket& b, double hz, double burst) {
    b.tokens = std::min(burst, b.tokens + double(now - b.last_ns) * 1e-9 * hz);
    b.last_ns = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };
  if (!refill(total_, opt_.total_hz, opt_.total_hz / 10)) return false;
  std::string k = source_key(from);
  auto it = buckets_.find(k);
  if (it == buckets_.end()) {
    if (buckets_.size() >= 4096) {  // forget sources idle for 10 s; refuse new ones if still full
      std::erase_if(buckets_, [&](auto& kv) { return now - kv.second.last_ns > 10'000'000'000ll; });
      if (buckets_.size() >= 4096) return false;
    }
    it = buckets_.emplace(k, Bucket{opt_.per_source_burst, now}).first;
  }
  return refill(it->second, opt_.per_source_hz, opt_.per_source_burst);
}

bool Responder::verified(const sockaddr_storage& from, const minrtt::Message& probe, int64_t now) const {
  if (!opt_.key.empty()) return true;  // decode() checked the MAC: sent by a key holder
  std::string src = source_key(from);
  if (allow_.count(src)) return true;
  return cookies_.check(src, probe.reply_port, now, probe.a, probe.b);
}

minrtt::Message Responder::answer_to(minrtt::MsgType t, const minrtt::Message& probe) {
  minrtt::Message a;
  a.type = t;
  a.session = session_;
  a.seq = ++seq_;
  a.echo_session = probe.session;
  a.echo_seq = probe.seq;
  a.node = opt_.node;
  return a;
}

// One datagram, the probe's size, from the listening socket (no transmit stamp
// queued for it).
void Responder::send_cookie(const sockaddr_storage& to, socklen_t len, const minrtt::Message& probe, int64_t now) {
  minrtt::Message c = answer_to(minrtt::MsgType::Cookie, probe);
  auto ck = cookies_.make(source_key(to), probe.reply_port, now);
  c.a = ck[0];
  c.b = ck[1];
  // kMessageBytes, as every message: decode() took the probe only at that size.
  auto bytes = minrtt::encode(c, nullptr);
  if (sendto(rx_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), len) != ssize_t(bytes.size()))
    stats_.send_errors++;
  else
    stats_.cookies++;
}

void Responder::serve_one() {
  // Correlation point and realtime offset BEFORE the datagram is read: with the
  // one after the reply they bracket the round's stamps.
  StampClock sc;
  sc.sim = &opt_.sim;
  sc.sample_before();
  uint8_t buf[minrtt::kMessageBytes + 1];
  sockaddr_storage from{};
  socklen_t fl = sizeof from;
  uint64_t rt2 = 0;
  ssize_t n = recv_stamped(rx_, buf, sizeof buf, &from, &fl, &rt2, MSG_DONTWAIT);
  uint64_t u2 = rdtsc_now();
  if (n < 0) return;
  stats_.received++;
  const std::vector<uint8_t>* key = opt_.key.empty() ? nullptr : &opt_.key;
  minrtt::Message m;
  minrtt::Reject why = minrtt::decode(buf, size_t(n), key, m);
  if (why == minrtt::Reject::None && m.type != minrtt::MsgType::Probe) why = minrtt::Reject::Unexpected;
  int64_t now = mono_ns();
  if (why == minrtt::Reject::None && !allow(from, now)) why = minrtt::Reject::RateLimited;
  bool ok_source = why == minrtt::Reject::None && verified(from, m, now);
  // Replay windows per source: a stranger sending a peer's session ids from its
  // own address cannot make this node drop the peer's probes as replays.
  uint64_t replay_id = m.session ^ std::hash<std::string>{}(source_key(from));
  if (ok_source && !replay_.accept(replay_id, m.seq)) why = minrtt::Reject::Replayed;
  if (refused(why)) return;
  sockaddr_storage to = from;
  set_port(to, m.reply_port);
  if (!ok_source) {
    send_cookie(to, fl, m, now);
    return;
  }
  answer(m, to, fl, sc, u2, rt2, now);
}

// Counts a refused probe under its reason; whether it was refused.
bool Responder::refused(minrtt::Reject why) {
  switch (why) {
    case minrtt::Reject::None:
      return false;
    case minrtt::Reject::Malformed:
      stats_.malformed++;
      break;
    case minrtt::Reject::BadVersion:
      stats_.bad_version++;
      break;
    case minrtt::Reject::BadAuth:
      stats_.bad_auth++;
      break;
    case minrtt::Reject::Replayed:
      stats_.replayed++;
      break;
    case minrtt::Reject::RateLimited:
      stats_.rate_limited++;
      break;
    case minrtt::Reject::Unexpected:
      stats_.unexpected++;
      break;
  }
  return true;
}

// The reply with the user-space stamps (u2 read right after the probe, u3 right
// before sending), then the followup with the kernel stamps of the probe's
// arrival (rt2) and the reply's departure, once both are known.
void Responder::answer(const minrtt::Message& m, const sockaddr_storage& to, socklen_t fl, StampClock& sc, uint64_t u2,
                       uint64_t rt2, int64_t now) {
  const std::vector<uint8_t>* key = opt_.key.empty() ? nullptr : &opt_.key;
  minrtt::Message r = answer_to(minrtt::MsgType::Reply, m);
  r.a = sc.user_tsc(u2);
  uint64_t u3 = rdtsc_now();
  r.b = sc.user_tsc(u3);
  auto bytes = minrtt::encode(r, key);
  if (sendto(tx_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), fl) != ssize_t(bytes.size())) {
    stats_.send_errors++;
    return;
  }
  uint32_t reply_id = tx_count_++;
  stats_.answered++;
  stats_.last_probe_ns = now;
  std::optional<uint64_t> rt3 = read_tx_stamp(tx_, reply_id, 20);
  sc.sample_after();
  bool step = !sc.consistent();
  if (!rt2) stats_.no_rx_stamp++;
  if (!rt3) stats_.no_tx_stamp++;
  if (step) stats_.clock_step++;
  minrtt::Message f = r;
  f.type = minrtt::MsgType::Followup;
  f.seq = ++seq_;
  f.kernel_ok = rt2 && rt3 && !step;
  f.a = rt2 ? sc.realtime_to_tsc(rt2) : 0;
  f.b = rt3 ? sc.realtime_to_tsc(*rt3) : 0;
  if (f.kernel_ok && f.b < f.a) f.kernel_ok = false;  // transmit before receive: not to be trusted
  bytes = minrtt::encode(f, key);
  if (sendto(tx_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), fl) != ssize_t(bytes.size())) {
    stats_.send_errors++;
    return;
  }
  tx_count_++;
  stats_.followups++;
}

}  // namespace cptrace
