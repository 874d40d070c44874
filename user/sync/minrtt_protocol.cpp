// MinRTT wire format, HMAC (OpenSSL) and replay window: see minrtt_protocol.h.
#include "sync/minrtt_protocol.h"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace cptrace::minrtt {
namespace {

void put16(uint8_t* p, uint16_t v) { memcpy(p, &v, 2); }
void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }
uint16_t get16(const uint8_t* p) { uint16_t v; memcpy(&v, p, 2); return v; }
uint32_t get32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }

std::array<uint8_t, kMacBytes> mac_of(const uint8_t* data, const std::vector<uint8_t>& key) {
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), int(key.size()), data, kMacOffset, full, &len) ||
      len < kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  std::array<uint8_t, kMacBytes> m;
  memcpy(m.data(), full, kMacBytes);
  return m;
}

}  // namespace

const char* reject_name(Reject r) {
  switch (r) {
    case Reject::None: return "ok";
    case Reject::Malformed: return "malformed";
    case Reject::BadVersion: return "bad_version";
    case Reject::BadAuth: return "bad_auth";
    case Reject::Replayed: return "replayed";
    case Reject::RateLimited: return "rate_limited";
    case Reject::Unexpected: return "unexpected";
  }
  return "?";
}

std::vector<uint8_t> load_key(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("--key {}: cannot read ({})", path, strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  auto ws = [](unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && ws(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && ws(s[i])) ++i;
  s.erase(0, i);
  if (s.size() < 16)
    throw std::runtime_error(fmt::format("--key {}: {} bytes, need at least 16 (e.g. `openssl rand -hex 32 > {}`)",
                                         path, s.size(), path));
  return {s.begin(), s.end()};
}

Bytes encode(const Message& m, const std::vector<uint8_t>* key) {
  if (m.node.empty() || m.node.size() > kMaxNodeName || m.node.find('\0') != std::string::npos)
    throw std::invalid_argument(fmt::format("node name '{}' must be 1..{} bytes without NUL", m.node, kMaxNodeName));
  Bytes b{};
  uint8_t* p = b.data();
  put32(p, kMagic);
  p[4] = kProtocolVersion;
  p[5] = uint8_t(m.type);
  put16(p + 6, uint16_t((key ? kFlagMac : 0) | (m.kernel_ok ? kFlagKernelOk : 0)));
  put64(p + 8, m.session);
  put64(p + 16, m.seq);
  put64(p + 24, m.echo_session);
  put64(p + 32, m.echo_seq);
  put64(p + 40, m.a);
  put64(p + 48, m.b);
  put16(p + 56, m.reply_port);
  p[58] = uint8_t(m.node.size());
  memcpy(p + 60, m.node.data(), m.node.size());
  if (key) {
    auto mac = mac_of(p, *key);
    memcpy(p + kMacOffset, mac.data(), kMacBytes);
  }
  return b;
}

Reject decode(const uint8_t* p, size_t len, const std::vector<uint8_t>* key, Message& m) {
  if (len < 8 || get32(p) != kMagic) return Reject::Malformed;
  if (p[4] != kProtocolVersion) return Reject::BadVersion;
  if (len != kMessageBytes) return Reject::Malformed;
  uint8_t type = p[5];
  uint16_t flags = get16(p + 6);
  if (type < 1 || type > 3 || (flags & ~kKnownFlags) || p[59] != 0) return Reject::Malformed;
  size_t nl = p[58];
  if (nl == 0 || nl > kMaxNodeName) return Reject::Malformed;
  if (memchr(p + 60, 0, nl) != nullptr) return Reject::Malformed;
  for (size_t i = 60 + nl; i < kMacOffset; ++i)
    if (p[i]) return Reject::Malformed;
  m.type = MsgType(type);
  if ((m.type == MsgType::Probe) != (get16(p + 56) != 0)) return Reject::Malformed;
  bool has_mac = flags & kFlagMac;
  if (key) {
    if (!has_mac) return Reject::BadAuth;
    auto mac = mac_of(p, *key);
    if (CRYPTO_memcmp(mac.data(), p + kMacOffset, kMacBytes) != 0) return Reject::BadAuth;
  } else {
    if (has_mac) return Reject::BadAuth;
    for (size_t i = kMacOffset; i < kMessageBytes; ++i)
      if (p[i]) return Reject::Malformed;
  }
  m.kernel_ok = flags & kFlagKernelOk;
  m.session = get64(p + 8);
  m.seq = get64(p + 16);
  m.echo_session = get64(p + 24);
  m.echo_seq = get64(p + 32);
  m.a = get64(p + 40);
  m.b = get64(p + 48);
  m.reply_port = get16(p + 56);
  m.node.assign(reinterpret_cast<const char*>(p + 60), nl);
  return Reject::None;
}

bool ReplayWindow::accept(uint64_t session, uint64_t seq) {
  auto it = map_.find(session);
  if (it == map_.end()) {
    if (map_.size() >= max_sessions_) {
      auto oldest = std::min_element(map_.begin(), map_.end(), [](auto& a, auto& b) {
        return a.second.touched < b.second.touched;
      });
      map_.erase(oldest);
    }
    map_[session] = State{seq, 1, ++clock_};
    return true;
  }
  State& s = it->second;
  if (seq > s.top) {
    uint64_t shift = seq - s.top;
    s.bits = shift >= kWindow ? 1 : (s.bits << shift) | 1;
    s.top = seq;
  } else {
    uint64_t back = s.top - seq;
    if (back >= kWindow) return false;
    if (s.bits & (uint64_t(1) << back)) return false;
    s.bits |= uint64_t(1) << back;
  }
  s.touched = ++clock_;
  return true;
}

uint64_t random_session() {
  uint64_t v = 0;
  while (v == 0)
    if (getrandom(&v, sizeof v, 0) != sizeof v) throw std::runtime_error("getrandom failed");
  return v;
}

}  // namespace cptrace::minrtt
