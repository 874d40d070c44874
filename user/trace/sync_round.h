// One MinRTT probe round, the contract between the MinRTT daemon (writer) and
// translation (reader).
//
// A round is initiated by this node (A) towards a peer (B): A transmits at t1, B
// receives at t2 and transmits its reply at t3, A receives it at t4. t1/t4 are
// in A's TSC ticks, t2/t3 in B's TSC ticks, each taken in the kernel and already
// passed through the node's clock map (and its simulated transform, if any), so
// translation never needs the other node's correlation stream to use a round.
// u1..u4 are the same instants taken in user space around send/recv, kept so
// the gain of kernel timestamps stays visible.
//
// Stored in FrameType::Sync frames as a JSON array of objects (see to_json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct SyncRound {
  std::string peer;  // the peer's node name (as it reports itself)
  std::string peer_addr;  // HOST:PORT the round went to
  std::string phase;  // "start" (MinRTT1), "stop" (MinRTT2) or "stream"
  uint64_t seq = 0;  // round number within this recording
  uint64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;  // kernel stamps (A, B, B, A TSC)
  uint64_t u1 = 0, u2 = 0, u3 = 0, u4 = 0;  // user-space stamps of the same round
  bool kernel_ok = false;  // false: a kernel stamp is missing or a clock step could have faked it
  bool user_ok = false;

  // Kernel and user-space round-trip times in ticks of A: (t4-t1) - (t3-t2)
  // (B's ticks counted as A's: the frequency error over one round is negligible).
  int64_t kernel_rtt() const { return int64_t(t4 - t1) - int64_t(t3 - t2); }
  int64_t user_rtt() const { return int64_t(u4 - u1) - int64_t(u3 - u2); }
  bool operator==(const SyncRound&) const = default;
};

inline nlohmann::json to_json(const SyncRound& r) {
  return {{"peer", r.peer},
          {"peer_addr", r.peer_addr},
          {"phase", r.phase},
          {"seq", r.seq},
          {"t", {r.t1, r.t2, r.t3, r.t4}},
          {"u", {r.u1, r.u2, r.u3, r.u4}},
          {"kernel_ok", r.kernel_ok},
          {"user_ok", r.user_ok}};
}

// Throws nlohmann::json exceptions on a malformed object (the reader turns them
// into a TraceError naming the frame's offset).
inline SyncRound sync_round_from_json(const nlohmann::json& j) {
  SyncRound r;
  r.peer = j.at("peer").get<std::string>();
  r.peer_addr = j.value("peer_addr", "");
  r.phase = j.at("phase").get<std::string>();
  r.seq = j.at("seq").get<uint64_t>();
  const auto& t = j.at("t");
  const auto& u = j.at("u");
  if (t.size() != 4 || u.size() != 4) throw std::runtime_error("sync round: t and u need 4 stamps");
  r.t1 = t[0];
  r.t2 = t[1];
  r.t3 = t[2];
  r.t4 = t[3];
  r.u1 = u[0];
  r.u2 = u[1];
  r.u3 = u[2];
  r.u4 = u[3];
  r.kernel_ok = j.at("kernel_ok").get<bool>();
  r.user_ok = j.at("user_ok").get<bool>();
  return r;
}

inline std::string sync_frame_json(const std::vector<SyncRound>& rounds) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rounds) a.push_back(to_json(r));
  return a.dump();
}

}  // namespace cptrace
