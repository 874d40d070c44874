// MinRTT wire format (UDP), authentication and replay protection.
//
// A round initiated by A towards B's responder is three datagrams:
//   A -> B  Probe     (A's session + seq, the port A receives replies on)
//   B -> A  Reply     (echoes the probe's session/seq; u2, u3: B's user-space stamps)
//   B -> A  Followup  (echoes the probe; t2, t3: B's KERNEL stamps, already in B's
//                      TSC, and whether B trusts them — t3 is only known after the
//                      reply has left, hence the separate message)
//
// Reflection: B sends two datagrams for one probe, so B answers only sources it
// has reason to believe sent the probe themselves: a listed peer (--allow, or the
// --peers of record/sync), a probe carrying a valid MAC (--key), or a source that
// passed a return-routability check. For that, a probe from any other source gets
// one Cookie datagram, the same size as the probe, instead of an answer:
//   B -> A  Cookie    (echoes the probe; a, b: a 128-bit cookie = HMAC of B's
//                      per-process secret over the source address, reply port and
//                      a 64 s epoch; valid for the current and the previous epoch)
// A repeats its probe with the cookie in a, b and then gets the reply and the
// followup. A spoofed source never sees its cookie, so it only ever gets back a
// datagram no larger than the one it sent.
//
// Every message is exactly kMessageBytes, little-endian:
//   off len field
//    0   4  magic "CPMR" (0x524D5043)
//    4   1  version (kProtocolVersion)
//    5   1  type (1 probe, 2 reply, 3 followup, 4 cookie)
//    6   2  flags: bit0 MAC present, bit1 kernel stamps valid (followup)
//    8   8  session   sender's random 64-bit id, new per process
//   16   8  seq       sender's message counter within the session (replay window)
//   24   8  echo_session  reply/followup: the probe's session (probe: 0)
//   32   8  echo_seq      reply/followup: the probe's seq      (probe: 0)
//   40   8  a         reply: u2, followup: t2, probe/cookie: cookie bytes 0..7
//   48   8  b         reply: u3, followup: t3, probe/cookie: cookie bytes 8..15
//                     (a probe without a cookie: 0, 0)
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
constexpr uint8_t kProtocolVersion = 2;  // 2: cookie (return-routability check)
constexpr size_t kMessageBytes = 112;
constexpr size_t kMacOffset = 96;
constexpr size_t kMacBytes = 16;
constexpr size_t kMaxNodeName = 36;
constexpr uint16_t kDefaultPort = 7711;

enum class MsgType : uint8_t { Probe = 1, Reply = 2, Followup = 3, Cookie = 4 };
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
  Malformed,  // length, magic, type, flags, reserved bytes, node name
  BadVersion,  // a well-formed header of another protocol version
  BadAuth,  // MAC missing, unexpected or wrong
  Replayed,  // seq already seen or too old for the window
  RateLimited,  // responder only
  Unexpected,  // a valid message nobody asked for (wrong type, stale round)
};
const char* reject_name(Reject r);

// Key file format (as chrony's keys, one key per file): text, the key is the
// file's bytes with surrounding whitespace stripped, at least 16 bytes; `cptrace
// keygen` writes 64 hex digits (32 random bytes) and a newline. The same file is
// copied to every node (scp, configuration management), mode 0600.
//
// Loads a key file. Throws std::runtime_error naming the file and the problem when
// it is a symlink, not a regular file, owned by someone other than root or the
// effective user, readable or writable by group or others, or too short.
std::vector<uint8_t> load_key(const std::string& path);

// A new key: 64 hex digits from 32 bytes of getrandom().
std::string generate_key_text();
// Writes a new key to `path`, created 0600 with O_EXCL|O_NOFOLLOW (so never
// through a symlink planted there); an existing file (or symlink) is refused
// unless `overwrite`, which removes the name itself first (never a link's target).
// Throws std::runtime_error naming the path.
void write_key_file(const std::string& path, bool overwrite);

// `--key FILE` or `--insecure`, as every MinRTT command requires one of them:
// returns the key, or an empty key after saying the --insecure warning (when
// `warn`). Throws std::invalid_argument (a clear message) when neither or both
// are given, std::runtime_error for a bad key file.
std::vector<uint8_t> key_or_insecure(const std::string& key_file, bool insecure, bool warn = true);

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
    uint64_t top = 0;  // highest seq accepted
    uint64_t bits = 0;  // bit i: top - i accepted
    uint64_t touched = 0;
  };
  size_t max_sessions_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, State> map_;
};

// A random 64-bit session id (getrandom).
uint64_t random_session();

// Return-routability cookies (see the top of this file). Stateless: a random
// secret per process; a cookie binds the source address, the reply port and the
// epoch.
class CookieJar {
 public:
  static constexpr int64_t kEpochNs = 64'000'000'000;
  CookieJar();
  // The cookie for this source address (IP bytes, 4 or 16) and reply port at
  // monotonic time now_ns.
  std::array<uint64_t, 2> make(const std::string& addr, uint16_t port, int64_t now_ns) const;
  // True when (a, b) is the cookie of the current or the previous epoch.
  bool check(const std::string& addr, uint16_t port, int64_t now_ns, uint64_t a, uint64_t b) const;

 private:
  std::array<uint64_t, 2> at_epoch(const std::string& addr, uint16_t port, int64_t epoch) const;
  std::vector<uint8_t> secret_;
};

}  // namespace cptrace::minrtt
