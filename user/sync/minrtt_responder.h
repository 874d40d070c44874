// The MinRTT responder: answers probes with its kernel receive/transmit stamps
// (t2, t3) converted to this node's TSC. Standalone in `cptrace minrttd`, embedded
// in `cptrace record` so that recording peers can probe each other.
//
// Hardening: only well-formed probes of this protocol version are answered (with
// --key: only authenticated ones, each (session, seq) once per source — replay
// window), with a token bucket per source address and one overall; every refused
// datagram is counted by reason. A probe is answered (reply + followup) only when
// its source is verified: authenticated by the key, listed (`allow`), or carrying
// the cookie this responder gave that address; any other probe gets one cookie
// datagram of its own size (minrtt_protocol.h), so a spoofed source is never sent
// more than it sent. The reply goes out of a separate socket, so transmit-stamp
// notifications never wake the receiving loop.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <unordered_map>
#include <unordered_set>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_transform.h"
#include "sync/minrtt_protocol.h"

namespace cptrace {

struct StampClock;  // sync/kernel_timestamps.h

struct ResponderOptions {
  std::string listen;  // ADDR:PORT; "" = [::]:7711 (dual stack), else 0.0.0.0:7711
  std::string node;  // name sent in every reply
  std::vector<uint8_t> key;  // empty: no authentication
  std::vector<sockaddr_storage> allow;  // sources answered without a cookie (ports ignored)
  ClockTransform sim;  // test only
  double per_source_hz = 5000;  // token bucket per source IP
  double per_source_burst = 500;
  double total_hz = 50000;  // all sources together
};

struct ResponderStats {
  std::atomic<uint64_t> received{0}, answered{0}, followups{0};
  std::atomic<uint64_t> cookies{0};  // probes from unverified sources answered with a cookie only
  std::atomic<uint64_t> malformed{0}, bad_version{0}, bad_auth{0}, replayed{0}, rate_limited{0}, unexpected{0};
  std::atomic<uint64_t> no_rx_stamp{0}, no_tx_stamp{0}, clock_step{0}, send_errors{0};
  std::atomic<int64_t> last_probe_ns{0};  // CLOCK_MONOTONIC of the last answered probe
  uint64_t rejected() const;
  nlohmann::json to_json() const;
  std::string line() const;  // one-line summary (daemon stats line)
};

class Responder {
 public:
  // Binds (throws std::runtime_error naming the address and errno text).
  explicit Responder(ResponderOptions opt);
  ~Responder();
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  // Serves on a thread until stop().
  void start();
  void stop();

  std::string local_address() const;
  const ResponderStats& stats() const { return stats_; }

 private:
  struct Bucket {
    double tokens;
    int64_t last_ns;
  };
  // Asleep in poll() on the socket and stop_fd_ until a datagram or stop().
  void run();
  void serve_one();
  bool refused(minrtt::Reject why);
  void answer(const minrtt::Message& m, const sockaddr_storage& to, socklen_t len, StampClock& sc, uint64_t u2,
              uint64_t rt2, int64_t now_ns);
  bool allow(const sockaddr_storage& from, int64_t now_ns);
  bool verified(const sockaddr_storage& from, const minrtt::Message& probe, int64_t now_ns) const;
  void send_cookie(const sockaddr_storage& to, socklen_t len, const minrtt::Message& probe, int64_t now_ns);
  // An answer of type `t` to `probe`: this responder's session, next seq and node, echoing the probe.
  minrtt::Message answer_to(minrtt::MsgType t, const minrtt::Message& probe);

  ResponderOptions opt_;
  int rx_ = -1, tx_ = -1;
  uint32_t tx_count_ = 0;
  uint64_t session_, seq_ = 0;
  minrtt::ReplayWindow replay_;
  minrtt::CookieJar cookies_;
  std::unordered_set<std::string> allow_;  // source_key() of the allowed addresses
  std::unordered_map<std::string, Bucket> buckets_;
  Bucket total_;
  ResponderStats stats_;
  int stop_fd_ = -1;  // eventfd written by stop()
  std::thread thread_;
};

}  // namespace cptrace
