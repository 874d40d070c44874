// libFuzzer target: any datagram as the MinRTT responder and initiator receive
// it (sync/minrtt_protocol.h), with and without a key, then its (session, seq)
// through the replay window as the receiver does.
//
// Properties checked, beyond "no crash, leak or hang":
//  - with a key, a datagram whose MAC is not the key's HMAC over bytes 0..95 is
//    refused as BadAuth whatever else it holds (magic, version and length
//    aside): the MAC is checked before any field is used;
//  - an accepted datagram encodes back to exactly its own bytes (one encoding
//    per message: nothing the parser ignored can carry anything);
//  - the replay window never accepts one (session, seq) twice while it
//    remembers the session, and never holds more sessions than its cap.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "sync/minrtt_protocol.h"

using namespace cptrace::minrtt;

namespace {

const std::vector<uint8_t> kKey(32, 0x5a);  // the seed corpus's key (tests/fuzz/minrtt/README)

bool mac_matches(const uint8_t* p) {
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), kKey.data(), int(kKey.size()), p, kMacOffset, full, &len);
  return (p[6] & kFlagMac) && std::memcmp(full, p + kMacOffset, kMacBytes) == 0;
}

void check_decode(const uint8_t* data, size_t size, const std::vector<uint8_t>* key) {
  Message m;
  Reject r = decode(data, size, key, m);
  bool framed = size == kMessageBytes && std::memcmp(data, &kMagic, 4) == 0 && data[4] == kProtocolVersion;
  if (key && framed && !mac_matches(data) && r != Reject::BadAuth) __builtin_trap();
  if (r != Reject::None) return;
  if (!framed) __builtin_trap();
  Bytes again = encode(m, key);
  if (std::memcmp(again.data(), data, kMessageBytes) != 0) __builtin_trap();
}

// The input, 16 bytes at a time, as (session, seq) pairs over 16 sessions: a
// window that holds them all must never accept a pair twice; one capped at 4
// must never hold more.
void check_replay(const uint8_t* data, size_t size) {
  ReplayWindow all(16), capped(4);
  std::set<std::pair<uint64_t, uint64_t>> accepted;
  for (size_t i = 0; i + 16 <= size; i += 16) {
    uint64_t session, seq;
    std::memcpy(&session, data + i, 8);
    std::memcpy(&seq, data + i + 8, 8);
    session &= 15;
    if (all.accept(session, seq) && !accepted.insert({session, seq}).second) __builtin_trap();
    capped.accept(session, seq);
    if (capped.sessions() > 4) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_decode(data, size, nullptr);
  check_decode(data, size, &kKey);
  check_replay(data, size);
  return 0;
}
