// MinRTT initiator: see minrtt_rounds.h.
#include "sync/minrtt_rounds.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>

#include "sync/kernel_timestamps.h"

namespace cptrace {

std::vector<Peer> parse_peers(const std::string& csv, const std::string& flag) {
  std::vector<Peer> out;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw std::invalid_argument(fmt::format("{} '{}': empty entry", flag, csv));
    Peer p;
    p.text = item;
    socklen_t len = 0;
    p.addr = parse_endpoint(item, minrtt::kDefaultPort, flag, &len);
    out.push_back(p);
  }
  if (out.empty()) throw std::invalid_argument(flag + ": no peer given");
  return out;
}

nlohmann::json PeerCounters::to_json() const {
  return {{"attempted", attempted},   {"completed", completed}, {"lost", lost},        {"no_followup", no_followup},
          {"kernel_bad", kernel_bad}, {"cookies", cookies},     {"rejected", rejected}};
}

Initiator::Initiator(std::string node, const std::vector<uint8_t>* key, const ClockTransform* sim, int timeout_ms)
    : node_(std::move(node)), key_(key), sim_(sim), timeout_ms_(timeout_ms), session_(minrtt::random_session()) {
  if (node_.empty() || node_.size() > minrtt::kMaxNodeName)
    throw std::invalid_argument(fmt::format("--node '{}': 1..{} bytes", node_, minrtt::kMaxNodeName));
}

Initiator::~Initiator() {
  for (Socks* s : {&v4_, &v6_}) {
    if (s->tx >= 0) close(s->tx);
    if (s->rx >= 0) close(s->rx);
  }
}

Initiator::Socks& Initiator::socks_for(int family) {
  Socks& s = family == AF_INET ? v4_ : v6_;
  if (s.tx >= 0) return s;
  s.tx = open_stamped_udp(family, true, false);
  s.rx = open_stamped_udp(family, false, true);
  sockaddr_storage any{};
  any.ss_family = sa_family_t(family);
  if (bind(s.rx, reinterpret_cast<sockaddr*>(&any), sockaddr_len(any)) != 0)
    throw std::runtime_error(fmt::format("cannot bind the reply socket: {}", strerror(errno)));
  socklen_t l = sizeof any;
  getsockname(s.rx, reinterpret_cast<sockaddr*>(&any), &l);
  s.rx_port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&any)->sin_port
                                      : reinterpret_cast<sockaddr_in6*>(&any)->sin6_port);
  return s;
}

// Until both answers arrived or the timeout: anything stale, stray, replayed or
// unauthenticated is counted by reason and skipped, never taken as an answer.
Initiator::Answers Initiator::await_answers(const Socks& s, uint64_t probe_seq, PeerCounters& pc, SyncRound& r) {
  Answers got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (!(got.reply && got.followup) && !got.cookie) {
    int left =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) break;
    pollfd p{s.rx, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    uint8_t buf[minrtt::kMessageBytes + 1];
    uint64_t rt = 0;
    ssize_t n = recv_stamped(s.rx, buf, sizeof buf, nullptr, nullptr, &rt, MSG_DONTWAIT);
    uint64_t now = rdtsc_now();
    if (n < 0) continue;
    minrtt::Message m;
    minrtt::Reject why = minrtt::decode(buf, size_t(n), key_, m);
    if (why == minrtt::Reject::None &&
        (m.type == minrtt::MsgType::Probe || m.echo_session != session_ || m.echo_seq != probe_seq))
      why = minrtt::Reject::Unexpected;  // stale (a late answer to an earlier round) or stray
    if (why == minrtt::Reject::None && !replay_.accept(m.session, m.seq)) why = minrtt::Reject::Replayed;
    if (why != minrtt::Reject::None) {
      pc.rejected[minrtt::reject_name(why)]++;
      continue;
    }
    if (m.type == minrtt::MsgType::Cookie && !got.reply) {
      got.cookie = true;
      got.cookie_value = {m.a, m.b};
    } else if (m.type == minrtt::MsgType::Reply && !got.reply) {
      got.reply = true;
      got.u4 = now;
      got.rt4 = rt;
      r.peer = m.node;
      r.u2 = m.a;
      r.u3 = m.b;
    } else if (m.type == minrtt::MsgType::Followup && !got.followup) {
      got.followup = true;
      r.t2 = m.a;
      r.t3 = m.b;
      got.peer_kernel_ok = m.kernel_ok;
      if (r.peer.empty()) r.peer = m.node;
    }
  }
  return got;
}

std::optional<SyncRound> Initiator::round(const Peer& peer, const std::string& phase, uint64_t seq) {
  PeerCounters& pc = counters_[peer.text];
  pc.attempted++;
  // A responder that does not know this address yet sends a cookie first (its
  // return-routability check); the probe is repeated once with it. A cookie
  // expires after a minute or two: then the peer asks again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool cookie = false;
    auto r = try_round(peer, phase, seq, pc, cookie);
    if (!cookie) return r;
  }
  pc.lost++;
  return std::nullopt;
}

std::optional<SyncRound> Initiator::try_round(const Peer& peer, const std::string& phase, uint64_t seq,
                                              PeerCounters& pc, bool& cookie) {
  Socks& s = socks_for(peer.addr.ss_family);
  StampClock sc;
  sc.sim = sim_;
  sc.sample_before();

  minrtt::Message probe;
  probe.type = minrtt::MsgType::Probe;
  probe.session = session_;
  probe.seq = ++seq_;
  probe.reply_port = s.rx_port;
  probe.node = node_;
  auto ck = cookies_.find(peer.text);
  if (ck != cookies_.end()) {
    probe.a = ck->second[0];
    probe.b = ck->second[1];
  }
  auto bytes = minrtt::encode(probe, key_);
  uint64_t u1 = rdtsc_now();
  if (sendto(s.tx, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&peer.addr),
             sockaddr_len(peer.addr)) != ssize_t(bytes.size())) {
    pc.lost++;
    return std::nullopt;
  }
  uint32_t probe_id = s.tx_count++;

  SyncRound r;
  r.peer_addr = peer.text;
  r.phase = phase;
  r.seq = seq;
  Answers got = await_answers(s, probe.seq, pc, r);
  if (got.cookie) {
    pc.cookies++;
    cookies_[peer.text] = got.cookie_value;
    cookie = true;
    read_tx_stamp(s.tx, probe_id, 0);  // drop the probe's transmit stamp
    return std::nullopt;
  }
  if (!got.reply) {
    pc.lost++;
    return std::nullopt;
  }
  std::optional<uint64_t> rt1 = read_tx_stamp(s.tx, probe_id, 20);
  sc.sample_after();
  r.u1 = sc.user_tsc(u1);
  r.u4 = sc.user_tsc(got.u4);
  r.user_ok = true;
  r.t1 = rt1 ? sc.realtime_to_tsc(*rt1) : 0;
  r.t4 = got.rt4 ? sc.realtime_to_tsc(got.rt4) : 0;
  if (!got.followup) pc.no_followup++;
  r.kernel_ok = rt1 && got.rt4 && got.followup && got.peer_kernel_ok && sc.consistent() && r.t4 >= r.t1 && r.t3 >= r.t2;
  if (!r.kernel_ok) pc.kernel_bad++;
  pc.completed++;
  return r;
}

}  // namespace cptrace
