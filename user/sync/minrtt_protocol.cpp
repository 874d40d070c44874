// MinRTT wire format, HMAC (OpenSSL) and replay window: see minrtt_protocol.h.
#include "sync/minrtt_protocol.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "os/say.h"

namespace cptrace::minrtt {
namespace {

void put16(uint8_t* p, uint16_t v) { memcpy(p, &v, 2); }
void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }
uint16_t get16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

std::array<uint8_t, kMacBytes> mac_of(const uint8_t* data, const std::vector<uint8_t>& key) {
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), int(key.size()), data, kMacOffset, full, &len) || len < kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  std::array<uint8_t, kMacBytes> m;
  memcpy(m.data(), full, kMacBytes);
  return m;
}

}  // namespace

const char* reject_name(Reject r) {
  switch (r) {
    case Reject::None:
      return "ok";
    case Reject::Malformed:
      return "malformed";
    case Reject::BadVersion:
      return "bad_version";
    case Reject::BadAuth:
      return "bad_auth";
    case Reject::Replayed:
      return "replayed";
    case Reject::RateLimited:
      return "rate_limited";
    case Reject::Unexpected:
      return "unexpected";
  }
  return "?";
}

namespace {

// Why a key file with these attributes cannot be trusted; empty when it can.
std::string key_file_problem(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return fmt::format("owned by uid {}, neither root nor this user (uid {}): its owner can change the key", st.st_uid,
                       ::geteuid());
  if (st.st_mode & 077)
    return fmt::format(
        "mode {:04o} lets group or others read or change it; it must be 0600 or stricter "
        "(chmod 600 {})",
        st.st_mode & 07777, path);
  return "";
}

// The whole file, at most 64 KiB; `problem` set when it cannot be read or is larger.
std::string read_key_bytes(int fd, std::string& problem) {
  std::string s;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) problem = fmt::format("cannot read ({})", strerror(errno));
    if (n <= 0) break;
    s.append(buf, size_t(n));
    if (s.size() > 65536) {
      problem = "larger than 64 KiB: not a key file";
      break;
    }
  }
  return s;
}

std::string trim_whitespace(std::string s) {
  auto ws = [](unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && ws(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && ws(s[i])) ++i;
  s.erase(0, i);
  return s;
}

}  // namespace

std::vector<uint8_t> load_key(const std::string& path) {
  // Checked on the descriptor actually read (O_NOFOLLOW, fstat), so a file
  // switched between the checks and the read cannot slip through.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP)
      throw std::runtime_error(
          fmt::format("--key {}: is a symlink; give the key file itself (whoever can change "
                      "the link can choose the key)",
                      path));
    throw std::runtime_error(fmt::format("--key {}: cannot read ({})", path, strerror(errno)));
  }
  struct stat st {};
  std::string problem =
      ::fstat(fd, &st) != 0 ? fmt::format("cannot stat ({})", strerror(errno)) : key_file_problem(st, path);
  std::string s;
  if (problem.empty()) s = read_key_bytes(fd, problem);
  ::close(fd);
  if (!problem.empty()) throw std::runtime_error(fmt::format("--key {}: {}", path, problem));
  s = trim_whitespace(std::move(s));
  if (s.size() < 16)
    throw std::runtime_error(fmt::format("--key {}: {} bytes, need at least 16 (make one with `cptrace keygen -o {}`)",
                                         path, s.size(), path));
  return {s.begin(), s.end()};
}

std::string generate_key_text() {
  uint8_t raw[32];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("getrandom failed: {}", strerror(errno)));
    got += size_t(n);
  }
  std::string hex;
  for (uint8_t b : raw) hex += fmt::format("{:02x}", b);
  return hex;
}

void write_key_file(const std::string& path, bool overwrite) {
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..")
    throw std::runtime_error(fmt::format("-o {}: names a directory, not a key file", path));
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    throw std::runtime_error(fmt::format("-o {}: cannot open directory {} ({})", path, dir, strerror(errno)));
  auto fail = [&](const std::string& what) {
    int e = errno;
    ::close(dfd);
    throw std::runtime_error(fmt::format("-o {}: {} ({})", path, what, strerror(e)));
  };
  // unlinkat removes a symlink itself, never its target; the O_EXCL create below
  // then refuses anything planted in between.
  if (overwrite && ::unlinkat(dfd, name.c_str(), 0) != 0 && errno != ENOENT) fail("cannot remove the old file");
  int fd = ::openat(dfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      ::close(dfd);
      throw std::runtime_error(
          fmt::format("-o {}: already exists (file or symlink); refusing to overwrite it "
                      "(use -f to replace it)",
                      path));
    }
    fail("cannot create");
  }
  std::string text = generate_key_text() + "\n";
  bool ok =
      ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!ok) {
    ::unlinkat(dfd, name.c_str(), 0);
    errno = e;
    fail("cannot write");
  }
  ::fsync(dfd);
  ::close(dfd);
}

std::vector<uint8_t> key_or_insecure(const std::string& key_file, bool insecure, bool warn) {
  if (!key_file.empty() && insecure) throw std::invalid_argument("--key and --insecure: give one of them");
  if (!key_file.empty()) return load_key(key_file);
  if (!insecure)
    throw std::invalid_argument(
        "MinRTT needs a shared key: give --key FILE (make one with `cptrace keygen -o FILE`, copy it to every node, "
        "mode 0600), or --insecure to run unauthenticated (anyone who can reach this node can then forge rounds)");
  if (warn)
    say_line(
        "WARNING: --insecure: MinRTT probes and replies are NOT authenticated; anyone who can send to this node can "
        "forge rounds and move the translation's bounds (the trace records its rounds as unauthenticated)");
  return {};
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

// With a key, the MAC is checked before any field is looked at beyond the
// magic, version and length: a datagram from a stranger is only ever bytes
// hashed and compared.
Reject decode(const uint8_t* p, size_t len, const std::vector<uint8_t>* key, Message& m) {
  if (len < 8 || get32(p) != kMagic) return Reject::Malformed;
  if (p[4] != kProtocolVersion) return Reject::BadVersion;
  if (len != kMessageBytes) return Reject::Malformed;
  uint16_t flags = get16(p + 6);
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
  uint8_t type = p[5];
  if (type < 1 || type > 4 || (flags & ~kKnownFlags) || p[59] != 0) return Reject::Malformed;
  size_t nl = p[58];
  if (nl == 0 || nl > kMaxNodeName) return Reject::Malformed;
  if (memchr(p + 60, 0, nl) != nullptr) return Reject::Malformed;
  for (size_t i = 60 + nl; i < kMacOffset; ++i)
    if (p[i]) return Reject::Malformed;
  m.type = MsgType(type);
  if ((m.type == MsgType::Probe) != (get16(p + 56) != 0)) return Reject::Malformed;
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
      auto oldest = std::min_element(map_.begin(), map_.end(),
                                     [](auto& a, auto& b) { return a.second.touched < b.second.touched; });
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

CookieJar::CookieJar() : secret_(32) {
  if (getrandom(secret_.data(), secret_.size(), 0) != ssize_t(secret_.size()))
    throw std::runtime_error("getrandom failed");
}

std::array<uint64_t, 2> CookieJar::at_epoch(const std::string& addr, uint16_t port, int64_t epoch) const {
  uint8_t in[8 + 2 + 16];
  put64(in, uint64_t(epoch));
  put16(in + 8, port);
  size_t n = std::min(addr.size(), size_t(16));
  memcpy(in + 10, addr.data(), n);
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), secret_.data(), int(secret_.size()), in, 10 + n, full, &len) || len < 16)
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  return {get64(full), get64(full + 8)};
}

std::array<uint64_t, 2> CookieJar::make(const std::string& addr, uint16_t port, int64_t now_ns) const {
  return at_epoch(addr, port, now_ns / kEpochNs);
}

bool CookieJar::check(const std::string& addr, uint16_t port, int64_t now_ns, uint64_t a, uint64_t b) const {
  int64_t e = now_ns / kEpochNs;
  for (int64_t k : {e, e - 1}) {
    auto c = at_epoch(addr, port, k);
    uint64_t diff = (c[0] ^ a) | (c[1] ^ b);  // no early exit on the first differing byte
    if (diff == 0) return true;
  }
  return false;
}

uint64_t random_session() {
  uint64_t v = 0;
  while (v == 0)
    if (getrandom(&v, sizeof v, 0) != sizeof v) throw std::runtime_error("getrandom failed");
  return v;
}

}  // namespace cptrace::minrtt
