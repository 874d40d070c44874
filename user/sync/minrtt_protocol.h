// MinRTT wire format (UDP), authentication and replay protection.
//
// A round initiated by A towards B's responder is three datagrams:
//   A -> B  Probe     (A's session + seq, the port A receives replies on)
//   B -> A  Reply     (echoes the probe's session/seq; u2, u3: B's user-space stamps)
//   B -> A  Followup  (echoes the probe; t2, t3: B's KERNEL stamps, already in B's
//                      TSC, and whether B trusts them — t3 is only known after the
//                      reply has left, hence the separate message)
//
// Every message is exactly kMessageBytes, little-endian:
//   off len field
//    0   4  magic "CPMR" (0x524D5043)
//    4   1  version (kProtocolVersion)
//    5   1  type (1 probe, 2 reply, 3 followup)
//    6   2  flags: bit0 MAC present, bit1 kernel stamps valid (followup)
//    8   8  session   sender's random 64-bit id, new per process
//   16   8  seq       sender's message counter within the session (replay window)
//   24   8  echo_session  reply/followup: the probe's session (probe: 0)
//   32   8  echo_seq      reply/followup: the probe's seq      (probe: 0)
//   40   8  a         reply: u2, followup: t2                  (probe: 0)
//   48   8  b         reply: u3, followup: t3                  (probe: 0)
//   56   2  reply_port  probe: UDP port A receives on          (else 0)
//   58   1  node_len  1..kMaxNodeName
//   59   1  reserved  0
//   60  36  node      sender's node name, zero-padded
//   96  16  mac       HMAC-SHA256 over bytes 0..95, first 16 bytes; zero without key
// Anything else (other length, magic, version, type, unknown flag bits, nonzero
// reserved or padding, bad name length) is rejected and counted.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace cptrace::minrtt {

constexpr uint32_t kMagic = 0x524D5043;  // "CPMR" little-endian
constexpr uint8_t kProtocolVersion = 1;
constexpr size_t kMessageBytes = 112;
constexpr size_t kMacOffset = 96;
constexpr size_t kMacBytes = 16;
constexpr size_t kMaxNodeName = 36;
constexpr uint16_t kDefaultPort = 7711;

enum class MsgType : uint8_t { Probe = 1, Reply = 2, Followup = 3 };
constexpr uint16_t kFlagMac = 1, kFlagKernelOk = 2, kKnownFlags = kFlagMac | kFlagKernelOk;

struct Message {
  MsgType type = MsgType::Probe;
  bool kernel_ok = false;  // followup only
  uint64_t session = 0, seq = 0;
  uint64_t echo_session = 0, echo_seq = 0;
  uint64_t a = 0, b = 0;
  uint16_t reply_port = 0;
  std::string node;
};

// Why a datagram was not accepted (each has a counter on the receiving side).
enum class Reject {
  None = 0,
  Malformed,    // length, magic, type, flags, reserved bytes, node name
  BadVersion,   // a well-formed header of another protocol version
  BadAuth,      // MAC missing, unexpected or wrong
  Replayed,     // seq already seen or too old for the window
  RateLimited,  // responder only
  Unexpected,   // a valid message nobody asked for (wrong type, stale round)
};
const char* reject_name(Reject r);

// HMAC key from a file: its bytes, surrounding whitespace stripped; at least 16
// bytes. Throws std::runtime_error naming the file.
std::vector<uint8_t> load_key(const std::string& path);

using Bytes = std::array<uint8_t, kMessageBytes>;
// Throws std::invalid_argument on a node name that does not fit.
Bytes encode(const Message& m, const std::vector<uint8_t>* key);
// Parses and authenticates: with a key, a message must carry the right MAC; without
// one, a message carrying a MAC is refused too (this side cannot check it, and
// silently trusting it would mislead the sender).
Reject decode(const uint8_t* data, size_t len, const std::vector<uint8_t>* key, Message& out);

// Sliding replay window per session (as IPsec's): the last kWindow seqs of each
// session are remembered; a seq seen before or older than the window is refused.
// Sessions are capped (the oldest-touched session is forgotten), so a stranger
// cannot grow the table without bound.
class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 64;
  explicit ReplayWindow(size_t max_sessions = 4096) : max_sessions_(max_sessions) {}
  // True (and the seq is marked) when the seq is new for the session.
  bool accept(uint64_t session, uint64_t seq);
  size_t sessions() const { return map_.size(); }

 private:
  struct State {
    uint64_t top = 0;   // highest seq accepted
    uint64_t bits = 0;  // bit i: top - i accepted
    uint64_t touched = 0;
  };
  size_t max_sessions_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, State> map_;
};

// A random 64-bit session id (getrandom).
uint64_t random_session();

}  // namespace cptrace::minrtt
