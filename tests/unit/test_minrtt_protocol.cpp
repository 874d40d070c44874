// MinRTT wire format: codec round trip, every malformation refused with its
// reason, HMAC layout and tampering, the replay window, key files, endpoints.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "sync/kernel_timestamps.h"
#include "sync/minrtt_protocol.h"
#include "sync/minrtt_rounds.h"
#include "test_util.h"

namespace cptrace::minrtt {
namespace {

Message sample(MsgType t) {
  Message m;
  m.type = t;
  m.session = 0x1122334455667788ull;
  m.seq = 42;
  m.node = "node-1";
  if (t == MsgType::Probe) {
    m.reply_port = 40000;
  } else {
    m.echo_session = 0xdeadbeefcafef00dull;
    m.echo_seq = 41;
    m.a = 1'000'000'000'123ull;
    m.b = 1'000'000'000'999ull;
    m.kernel_ok = t == MsgType::Followup;
  }
  return m;
}

void expect_same(const Message& a, const Message& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.kernel_ok, b.kernel_ok);
  EXPECT_EQ(a.session, b.session);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.echo_session, b.echo_session);
  EXPECT_EQ(a.echo_seq, b.echo_seq);
  EXPECT_EQ(a.a, b.a);
  EXPECT_EQ(a.b, b.b);
  EXPECT_EQ(a.reply_port, b.reply_port);
  EXPECT_EQ(a.node, b.node);
}

const std::vector<uint8_t> kKey(32, 0x5a);

TEST(MinrttProtocol, RoundTripEveryTypeWithAndWithoutKey) {
  for (MsgType t : {MsgType::Probe, MsgType::Reply, MsgType::Followup, MsgType::Cookie})
    for (const std::vector<uint8_t>* key : {static_cast<const std::vector<uint8_t>*>(nullptr), &kKey}) {
      Message m = sample(t), out;
      Bytes b = encode(m, key);
      ASSERT_EQ(decode(b.data(), b.size(), key, out), Reject::None);
      expect_same(m, out);
    }
}

TEST(MinrttProtocol, LayoutIsLittleEndianAtDocumentedOffsets) {
  Bytes b = encode(sample(MsgType::Reply), nullptr);
  EXPECT_EQ(memcmp(b.data(), "CPMR", 4), 0);
  EXPECT_EQ(b[4], kProtocolVersion);
  EXPECT_EQ(b[5], 2);
  EXPECT_EQ(b[8], 0x88);  // session, LE
  EXPECT_EQ(b[16], 42);  // seq
  EXPECT_EQ(b[32], 41);  // echo_seq
  EXPECT_EQ(b[58], 6);  // node_len
  EXPECT_EQ(memcmp(b.data() + 60, "node-1", 6), 0);
}

TEST(MinrttProtocol, MacIsTruncatedHmacSha256OverTheFirst96Bytes) {
  Bytes b = encode(sample(MsgType::Probe), &kKey);
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  ASSERT_NE(HMAC(EVP_sha256(), kKey.data(), int(kKey.size()), b.data(), kMacOffset, full, &len), nullptr);
  EXPECT_EQ(memcmp(b.data() + kMacOffset, full, kMacBytes), 0);
  EXPECT_EQ(b[6] & kFlagMac, kFlagMac);
}

TEST(MinrttProtocol, AuthenticationFailures) {
  Message out;
  std::vector<uint8_t> other(32, 0x5b);
  Bytes b = encode(sample(MsgType::Probe), &kKey);
  EXPECT_EQ(decode(b.data(), b.size(), &other, out), Reject::BadAuth) << "wrong key";
  EXPECT_EQ(decode(b.data(), b.size(), nullptr, out), Reject::BadAuth) << "MAC nobody can check";
  Bytes plain = encode(sample(MsgType::Probe), nullptr);
  EXPECT_EQ(decode(plain.data(), plain.size(), &kKey, out), Reject::BadAuth) << "no MAC";
  // Any single flipped bit of an authenticated message is refused.
  for (size_t i = 0; i < kMessageBytes; ++i)
    for (int bit : {0, 7}) {
      Bytes t = b;
      t[i] ^= uint8_t(1 << bit);
      EXPECT_NE(decode(t.data(), t.size(), &kKey, out), Reject::None) << "byte " << i << " bit " << bit;
    }
}

TEST(MinrttProtocol, MalformedAndOtherVersionsAreRefusedWithTheirReason) {
  Message out;
  Bytes good = encode(sample(MsgType::Probe), nullptr);
  auto with = [&](size_t off, uint8_t v) {
    Bytes b = good;
    b[off] = v;
    return decode(b.data(), b.size(), nullptr, out);
  };
  EXPECT_EQ(decode(good.data(), 0, nullptr, out), Reject::Malformed);
  EXPECT_EQ(decode(good.data(), 7, nullptr, out), Reject::Malformed);
  EXPECT_EQ(decode(good.data(), kMessageBytes - 1, nullptr, out), Reject::Malformed);
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  EXPECT_EQ(decode(longer.data(), longer.size(), nullptr, out), Reject::Malformed);
  EXPECT_EQ(with(0, 'X'), Reject::Malformed);  // magic
  EXPECT_EQ(with(4, kProtocolVersion + 1), Reject::BadVersion);  // a future version
  EXPECT_EQ(with(4, 1), Reject::BadVersion);  // version 1 had no cookies
  EXPECT_EQ(with(4, 0), Reject::BadVersion);
  EXPECT_EQ(with(5, 0), Reject::Malformed);  // type
  EXPECT_EQ(with(5, 5), Reject::Malformed);
  EXPECT_EQ(with(6, 0x80), Reject::Malformed);  // unknown flag
  EXPECT_EQ(with(59, 1), Reject::Malformed);  // reserved
  EXPECT_EQ(with(58, 0), Reject::Malformed);  // empty name
  EXPECT_EQ(with(58, kMaxNodeName + 1), Reject::Malformed);
  EXPECT_EQ(with(90, 'x'), Reject::Malformed);  // padding after the name
  EXPECT_EQ(with(61, 0), Reject::Malformed);  // NUL inside the name
  EXPECT_EQ(with(100, 1), Reject::Malformed);  // MAC bytes without MAC flag
  Bytes noport = good;
  noport[56] = noport[57] = 0;
  EXPECT_EQ(decode(noport.data(), noport.size(), nullptr, out), Reject::Malformed) << "probe without reply port";
  Message longname = sample(MsgType::Probe);
  longname.node = std::string(kMaxNodeName + 1, 'n');
  EXPECT_THROW(encode(longname, nullptr), std::invalid_argument);
}

TEST(MinrttProtocol, ReplayWindow) {
  ReplayWindow w;
  EXPECT_TRUE(w.accept(1, 100));
  EXPECT_FALSE(w.accept(1, 100)) << "duplicate";
  EXPECT_TRUE(w.accept(1, 101));
  EXPECT_TRUE(w.accept(1, 99)) << "late but inside the window, first time";
  EXPECT_FALSE(w.accept(1, 99));
  EXPECT_TRUE(w.accept(1, 500));
  EXPECT_FALSE(w.accept(1, 500 - ReplayWindow::kWindow)) << "older than the window";
  EXPECT_TRUE(w.accept(1, 500 - ReplayWindow::kWindow + 1));
  EXPECT_FALSE(w.accept(1, 101)) << "old seq after a jump";
  EXPECT_TRUE(w.accept(2, 100)) << "sessions are independent";
  // The table is capped: the least recently used session is forgotten.
  ReplayWindow small(4);
  for (uint64_t s = 1; s <= 4; ++s) EXPECT_TRUE(small.accept(s, 1));
  EXPECT_TRUE(small.accept(2, 2));  // touch 2
  EXPECT_TRUE(small.accept(9, 1));  // evicts 1 (oldest touched)
  EXPECT_EQ(small.sessions(), 4u);
  EXPECT_FALSE(small.accept(2, 2));
  EXPECT_FALSE(small.accept(9, 1));
}

TEST(MinrttProtocol, KeyFiles) {
  testutil::TempDir tmp;
  std::ofstream(tmp / "short") << "tooshort\n";
  std::ofstream(tmp / "good") << "  0123456789abcdef0123\n";
  chmod((tmp / "short").c_str(), 0600);
  chmod((tmp / "good").c_str(), 0600);
  try {
    load_key(tmp / "short");
    ADD_FAILURE() << "accepted a short key";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("short"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_key(tmp / "missing"), std::runtime_error);
  auto k = load_key(tmp / "good");
  EXPECT_EQ(std::string(k.begin(), k.end()), "0123456789abcdef0123");
}

TEST(MinrttProtocol, EndpointsAndPeers) {
  socklen_t len;
  auto a = parse_endpoint("10.1.2.3:99", kDefaultPort, "--peers", &len);
  EXPECT_EQ(endpoint_string(a), "10.1.2.3:99");
  EXPECT_EQ(endpoint_string(parse_endpoint("10.1.2.3", kDefaultPort, "--peers", &len)), "10.1.2.3:7711");
  EXPECT_EQ(endpoint_string(parse_endpoint("[fd77::1:2]:8000", kDefaultPort, "--peers", &len)), "[fd77::1:2]:8000");
  EXPECT_EQ(endpoint_string(parse_endpoint("fd77::1:2", kDefaultPort, "--peers", &len)), "[fd77::1:2]:7711");
  for (const char* bad : {"10.1.2.3:", "10.1.2.3:99999", "10.1.2.3:99999999999999999999999", "10.1.2.3:+1",
                          "10.1.2.3:x", "[fd77::1", "no.such.host.invalid:1"}) {
    try {
      parse_endpoint(bad, kDefaultPort, "--peers", &len);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_peers("10.0.0.1:1,10.0.0.2").size(), 2u);
  EXPECT_THROW(parse_peers("10.0.0.1,,10.0.0.2"), std::invalid_argument);
}

}  // namespace
}  // namespace cptrace::minrtt
