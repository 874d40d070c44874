// The MinRTT initiator: one probe round towards a peer's responder, stamped in the
// kernel on both ends (t1 tx here, t2 rx there, t3 tx there, t4 rx here) and in
// user space around the same send/receive calls (u1..u4).
//
// Probes leave from one socket and replies arrive on another, so the transmit-stamp
// notification of the probe (queued on the sending socket's error queue) cannot wake
// the receiving thread inside the measured window; it is read after t4.
#pragma once
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_transform.h"
#include "sync/minrtt_protocol.h"
#include "trace/sync_round.h"

namespace cptrace {

struct Peer {
  std::string text;  // as given: HOST:PORT
  sockaddr_storage addr{};
};
// "HOST:PORT,HOST:PORT,..." (port defaults to 7711; [v6]:port). Throws
// std::invalid_argument naming the flag and the bad entry.
std::vector<Peer> parse_peers(const std::string& csv, const std::string& flag = "--peers");

// What happened to the rounds with one peer.
struct PeerCounters {
  uint64_t attempted = 0, completed = 0, lost = 0, no_followup = 0, kernel_bad = 0;
  uint64_t cookies = 0;  // the peer asked for a return-routability cookie first
  std::map<std::string, uint64_t> rejected;  // replies refused, by reason
  nlohmann::json to_json() const;
};

class Initiator {
 public:
  // key: nullptr or the HMAC key; sim: the node's simulated transform (test only).
  Initiator(std::string node, const std::vector<uint8_t>* key, const ClockTransform* sim, int timeout_ms = 200);
  ~Initiator();
  Initiator(const Initiator&) = delete;
  Initiator& operator=(const Initiator&) = delete;

  // One round; nullopt when no reply came within the timeout (counted as lost).
  // A round whose followup (t2, t3) is missing is returned with kernel_ok = false.
  std::optional<SyncRound> round(const Peer& peer, const std::string& phase, uint64_t seq);
  PeerCounters& counters(const std::string& peer) { return counters_[peer]; }
  const std::map<std::string, PeerCounters>& all_counters() const { return counters_; }

 private:
  struct Socks {
    int tx = -1, rx = -1;
    uint16_t rx_port = 0;
    uint32_t tx_count = 0;
  };
  Socks& socks_for(int family);
  // What came back for one probe: the reply (u2, u3, its kernel receive stamp)
  // and the followup (t2, t3), filled into the round as they arrive.
  struct Answers {
    bool reply = false, followup = false, peer_kernel_ok = false;
    bool cookie = false;  // the peer answered with a cookie: probe again with it
    std::array<uint64_t, 2> cookie_value{};
    uint64_t rt4 = 0, u4 = 0;  // receive stamp of the reply: kernel (realtime ns), rdtsc
  };
  Answers await_answers(const Socks& s, uint64_t probe_seq, PeerCounters& pc, SyncRound& r);
  // One probe and its answers; `cookie` set when the peer sent a cookie instead.
  std::optional<SyncRound> try_round(const Peer& peer, const std::string& phase, uint64_t seq, PeerCounters& pc,
                                     bool& cookie);

  std::string node_;
  const std::vector<uint8_t>* key_;
  const ClockTransform* sim_;
  int timeout_ms_;
  uint64_t session_, seq_ = 0;
  minrtt::ReplayWindow replay_;
  Socks v4_, v6_;
  std::map<std::string, PeerCounters> counters_;
  std::map<std::string, std::array<uint64_t, 2>> cookies_;  // per peer (as given)
};

}  // namespace cptrace
