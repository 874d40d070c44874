// MinRTT secure by default (issue: a root tool answering the network): a key or an
// explicit --insecure is required; key files are private and never followed through
// a link; --insecure rounds are flagged all the way to `latency`; a forger with the
// wrong key changes nothing; a spoofed probe never gets more bytes back than it
// carried; answers replayed to the initiator are refused and counted.
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <fmt/core.h>

#include "sync/minrtt_protocol.h"
#include "synth_cluster.h"
#include "record_util.h"
#include "test_util.h"
#include "testbed_util.h"
#include "clock/clock_transform.h"
#include "trace/trace_reader.h"
#include "translate/clock_relation.h"

using namespace cptrace;
using testbed::skip_reason;

namespace {

std::string in_ns(const std::string& ns, const std::string& cmd) { return "ip netns exec " + ns + " " + cmd; }

bool exists(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0;
}

std::string load_error(const std::string& path) {
  try {
    minrtt::load_key(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

nlohmann::json minrttd_stats(const std::string& out) {
  auto pos = out.find("minrttd stats ");
  if (pos == std::string::npos) return nullptr;
  return nlohmann::json::parse(out.substr(pos + 14, out.find('\n', pos) - pos - 14));
}

}  // namespace

TEST(MinrttSecurity, KeyOrInsecureIsRequiredBeforeAnythingIsCreated) {
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin();
  for (const std::string& cmd :
       {bin + " sync --peers 127.0.0.1:9 -o " + (tmp / "out"), bin + " minrttd --listen 127.0.0.1:0 --duration 1",
        testutil::record_cmd(tmp / "out", "--peers 127.0.0.1:9 -- /bin/true"),
        testutil::record_cmd(tmp / "out", "--minrtt-listen 127.0.0.1:7799 -- /bin/true")}) {
    auto r = testutil::run(cmd, tmp);
    EXPECT_NE(r.status, 0) << cmd;
    EXPECT_NE(r.err.find("needs a shared key: give --key FILE"), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("--insecure"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << "minrttd must not start: " << r.out;
    EXPECT_FALSE(exists(tmp / "out")) << cmd << ": created its output although refused";
  }
  auto both =
      testutil::run(bin + " sync --peers 127.0.0.1:9 --insecure --key " + (tmp / "k") + " -o " + (tmp / "out"), tmp);
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("--key and --insecure: give one of them"), std::string::npos) << both.err;
  EXPECT_FALSE(exists(tmp / "out"));
}

TEST(MinrttSecurity, KeygenWritesA0600KeyAndNeverThroughALink) {
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin();
  // A permissive umask must not widen the mode.
  auto r = testutil::run("umask 000; " + bin + " keygen -o " + (tmp / "k"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  struct stat st;
  ASSERT_EQ(stat((tmp / "k").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::string key = testutil::read_file(tmp / "k");
  ASSERT_EQ(key.size(), 65u) << key;
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), 64u) << key;
  EXPECT_EQ(minrtt::load_key(tmp / "k").size(), 64u);
  // Existing file: refused without -f and left alone; -f writes a different key.
  r = testutil::run(bin + " keygen -o " + (tmp / "k"), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_EQ(testutil::read_file(tmp / "k"), key);
  r = testutil::run(bin + " keygen -f -o " + (tmp / "k"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(testutil::read_file(tmp / "k"), key);
  // A planted symlink: dangling (would create its target) and to an existing file
  // (would overwrite it). Refused without -f; with -f the link itself is replaced.
  ASSERT_EQ(symlink((tmp / "created").c_str(), (tmp / "dangling").c_str()), 0);
  std::ofstream(tmp / "victim") << "precious\n";
  ASSERT_EQ(symlink((tmp / "victim").c_str(), (tmp / "link").c_str()), 0);
  for (const char* name : {"dangling", "link"}) {
    r = testutil::run(bin + " keygen -o " + (tmp / name), tmp);
    EXPECT_NE(r.status, 0) << name;
    EXPECT_NE(r.err.find(tmp / name), std::string::npos) << r.err;
  }
  EXPECT_FALSE(exists(tmp / "created"));
  r = testutil::run(bin + " keygen -f -o " + (tmp / "link"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(testutil::read_file(tmp / "victim"), "precious\n");
  ASSERT_EQ(lstat((tmp / "link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "-f replaces the link itself";
}

TEST(MinrttSecurity, LoadKeyRefusesLooseModeSymlinkForeignOwnerAndNonRegular) {
  testutil::TempDir tmp;
  const std::string good = tmp / "good";
  std::ofstream(good) << "0123456789abcdef0123456789abcdef\n";
  ASSERT_EQ(chmod(good.c_str(), 0600), 0);
  EXPECT_EQ(load_error(good), "");
  for (mode_t m : {0644, 0640, 0604, 0620}) {
    ASSERT_EQ(chmod(good.c_str(), m), 0);
    std::string e = load_error(good);
    EXPECT_NE(e.find(good), std::string::npos) << e;
    EXPECT_NE(e.find(fmt::format("mode {:04o}", m)), std::string::npos) << e;
  }
  ASSERT_EQ(chmod(good.c_str(), 0400), 0);
  EXPECT_EQ(load_error(good), "") << "read-only for the owner is fine";
  ASSERT_EQ(symlink(good.c_str(), (tmp / "link").c_str()), 0);
  EXPECT_NE(load_error(tmp / "link").find("is a symlink"), std::string::npos) << load_error(tmp / "link");
  ASSERT_EQ(mkdir((tmp / "dir").c_str(), 0700), 0);
  EXPECT_NE(load_error(tmp / "dir").find("not a regular file"), std::string::npos) << load_error(tmp / "dir");
  ASSERT_EQ(mkfifo((tmp / "fifo").c_str(), 0600), 0);
  EXPECT_NE(load_error(tmp / "fifo").find("not a regular file"), std::string::npos) << load_error(tmp / "fifo");
  if (geteuid() == 0) {
    ASSERT_EQ(chown(good.c_str(), 65534, 65534), 0);
    std::string e = load_error(good);
    EXPECT_NE(e.find("owned by uid 65534"), std::string::npos) << e;
  }
}

// Translation of a synthetic cluster whose node B took its rounds without a key:
// translate names B's pairs on stderr and in its meta.json, latency in its summary.
TEST(MinrttSecurity, UnauthenticatedRoundsAreNamedByTranslateAndLatency) {
  testutil::TempDir tmp;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 21);
  const long double span = 2e9L;
  cl.sync_all({{0, 1}, {1, 0}, {1, 2}, {2, 1}}, span);
  cl.pipeline(200, 100e6L, 5e6L);
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    dirs.push_back(tmp / cl.clock(i).name);
    cl.write(i, dirs.back(), span);
    // As record/sync write it: keyed everywhere but on B.
    std::string mp = dirs.back() + "/meta.json";
    auto meta = nlohmann::json::parse(testutil::read_file(mp));
    meta["minrtt"] = {{"authenticated", i != 1}};
    std::ofstream(mp, std::ios::trunc) << meta.dump();
  }
  const std::string bin = testutil::cptrace_bin();
  auto t = testutil::run(
      bin + " translate " + dirs[0] + " " + dirs[1] + " " + dirs[2] + " --reference A -o " + (tmp / "merged"), tmp);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.err.find("WARNING: unauthenticated MinRTT rounds (no --key): B->A, B->C"), std::string::npos) << t.err;
  TraceReader m(tmp / "merged");
  EXPECT_EQ(m.meta()["translated"]["unauthenticated_rounds"], nlohmann::json({"B->A", "B->C"}));
  auto l = testutil::run(bin + " latency " + (tmp / "merged") + " --from A.out --to C.in", tmp);
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("WARNING: unauthenticated MinRTT rounds (no --key): B->A, B->C"), std::string::npos) << l.out;
  // All keyed: no warning anywhere.
  for (const std::string& d : dirs) {
    auto meta = nlohmann::json::parse(testutil::read_file(d + "/meta.json"));
    meta["minrtt"]["authenticated"] = true;
    std::ofstream(d + "/meta.json", std::ios::trunc) << meta.dump();
  }
  t = testutil::run(
      bin + " translate " + dirs[0] + " " + dirs[1] + " " + dirs[2] + " --reference A -f -o " + (tmp / "merged"), tmp);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.err.find("unauthenticated"), std::string::npos) << t.err;
  l = testutil::run(bin + " latency " + (tmp / "merged") + " --from A.out --to C.in", tmp);
  EXPECT_EQ(l.out.find("unauthenticated"), std::string::npos) << l.out;
}

// --insecure works (with the cookie check for unlisted peers, none for --allow'ed
// ones), warns, and says so in meta.json; record too.
TEST(MinrttSecurity, InsecureSyncWarnsRecordsItAndPassesTheCookieCheck) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("mi", 3, "--delay 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin();
  testutil::Proc d(in_ns(tb.ns(1), bin + " minrttd --insecure --allow 10.77.3.2 --listen 10.77.1.2:7711 --node n1 "
                                         "--stats-interval 0"),
                   tmp / "d.out", tmp / "d.err");
  ASSERT_TRUE(d.wait_for("listening on 10.77.1.2:7711", 10)) << testutil::read_file(d.err_path);
  EXPECT_NE(testutil::read_file(d.err_path).find("WARNING: --insecure"), std::string::npos);
  std::map<int, nlohmann::json> peer;
  for (int k : {2, 3}) {
    std::string out = tmp / ("n" + std::to_string(k));
    auto r = testutil::run(in_ns(tb.ns(k), bin + " sync --insecure --node n" + std::to_string(k) +
                                               " --peers 10.77.1.2:7711 --sync-rounds 20 -o " + out),
                           tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("cptrace sync: WARNING: --insecure"), std::string::npos) << r.err;
    TraceReader t(out);
    EXPECT_EQ(t.meta()["minrtt"]["authenticated"], false);
    EXPECT_EQ(t.sync_rounds().size(), 20u);
    peer[k] = t.meta()["minrtt"]["peers"]["10.77.1.2:7711"];
  }
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait(10), 0);
  auto st = minrttd_stats(testutil::read_file(d.out_path));
  ASSERT_FALSE(st.is_null());
  EXPECT_EQ(peer[2]["cookies"].get<uint64_t>(), 1u) << "n2 is not listed: one cookie, then answers";
  EXPECT_EQ(peer[3]["cookies"].get<uint64_t>(), 0u) << "n3 is --allow'ed";
  EXPECT_EQ(st["cookies"].get<uint64_t>(), 1u) << st.dump();
  EXPECT_EQ(st["answered"].get<uint64_t>(), 40u) << st.dump();
}

TEST(MinrttSecurity, InsecureRecordingIsMarkedUnauthenticated) {
  REQUIRE_TESTBED();
  REQUIRE_BPF();
  testbed::Testbed tb("mj", 2, "--delay 10");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  auto r = testutil::run(in_ns(tb.ns(1), testutil::record_cmd(tmp / "t",
                                                              "--insecure --minrtt-listen 10.77.1.2:7711 "
                                                              "--sync-wait 0 -- /bin/true")),
                         tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("cptrace record: WARNING: --insecure"), std::string::npos) << r.err;
  TraceReader t(tmp / "t");
  ASSERT_TRUE(t.meta().contains("minrtt")) << t.meta().dump();
  EXPECT_EQ(t.meta()["minrtt"]["authenticated"], false);
}

namespace {

// Local UDP ports of the cptrace sockets of namespace `ns` bound to the wildcard
// address (the initiator's two sockets).
std::vector<uint16_t> wildcard_ports(const std::string& ns) {
  auto r = testbed::run("ip netns exec " + ns + " ss -Hunap");
  std::vector<uint16_t> ports;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"cptrace\"") == std::string::npos) continue;
    std::istringstream f(line);
    std::string state, rq, sq, local;
    f >> state >> rq >> sq >> local;
    if (local.rfind("0.0.0.0:", 0) == 0) ports.push_back(uint16_t(std::stoi(local.substr(8))));
  }
  return ports;
}

}  // namespace

// Two keyed nodes sync while a third, holding another key, sends them probes and
// "replies" echoing nothing it could know: every forged datagram is counted as
// bad_auth, no round is lost or bent, and the translation holds the truth.
TEST(MinrttSecurity, ForgerWithTheWrongKeyIsRejectedAndTranslationUnaffected) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("mf", 3, "--delay 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin();
  ASSERT_EQ(testutil::run(bin + " keygen -o " + (tmp / "key"), tmp).status, 0);
  ASSERT_EQ(testutil::run(bin + " keygen -o " + (tmp / "wrong"), tmp).status, 0);
  std::vector<uint8_t> wrong = minrtt::load_key(tmp / "wrong");
  const char* sims[] = {"1500000000,35", "-2500000000,-120"};
  std::vector<std::unique_ptr<testutil::Proc>> procs;
  for (int k = 1; k <= 2; ++k)
    procs.push_back(std::make_unique<testutil::Proc>(
        in_ns(tb.ns(k), bin + " sync --listen 10.77." + std::to_string(k) + ".2:7711 --node n" + std::to_string(k) +
                            " --peers 10.77." + std::to_string(3 - k) + ".2:7711 --key " + (tmp / "key") +
                            " --sync-rounds 600 --gap-ms 5 --sync-wait 20 --simulate-clock " + sims[k - 1] + " -o " +
                            (tmp / ("n" + std::to_string(k)))),
        tmp / ("out" + std::to_string(k)), tmp / ("err" + std::to_string(k))));
  // n2's reply sockets exist once it probed.
  std::vector<uint16_t> ports;
  for (int i = 0; i < 200 && ports.size() < 2; ++i, usleep(20000)) ports = wildcard_ports(tb.ns(2));
  ASSERT_EQ(ports.size(), 2u) << "n2's initiator sockets not found";
  int fd = testbed::socket_in(tb.ns(3), AF_INET, SOCK_DGRAM);
  auto send_to = [&](const std::string& ip, uint16_t port, const minrtt::Bytes& b) {
    testbed::Addr a = testbed::make_addr(ip, port);
    return sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&a.ss), a.len) == ssize_t(b.size());
  };
  uint64_t probes = 0, replies = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    minrtt::Message p;
    p.type = minrtt::MsgType::Probe;
    p.session = 0xf0f0 + i;
    p.seq = i + 1;
    p.reply_port = 9;
    p.node = "n2";
    probes += send_to("10.77.1.2", 7711, minrtt::encode(p, &wrong));
    minrtt::Message r;
    r.type = i % 2 ? minrtt::MsgType::Reply : minrtt::MsgType::Followup;
    r.session = 0xabc;
    r.seq = i + 1;
    r.echo_session = i;  // the real session is unknown to the forger; the MAC fails first anyway
    r.echo_seq = i;
    r.a = 1, r.b = 2;  // stamps implying any skew the forger likes
    r.node = "n1";
    bool all = true;
    for (uint16_t port : ports) all &= send_to("10.77.2.2", port, minrtt::encode(r, &wrong));
    replies += all;
    usleep(2000);
  }
  close(fd);
  for (auto& p : procs) ASSERT_EQ(p->wait(120), 0) << testutil::read_file(p->err_path);
  TraceReader t1(tmp / "n1"), t2(tmp / "n2");
  const auto& m1 = t1.meta()["minrtt"];
  const auto& m2 = t2.meta()["minrtt"];
  fprintf(stderr, "  forged: %llu probes to n1, %llu replies to each of n2's sockets; n1 responder %s; n2 rounds %s\n",
          (unsigned long long)probes, (unsigned long long)replies, m1["responder"].dump().c_str(),
          m2["peers"].dump().c_str());
  EXPECT_EQ(m1["responder"]["bad_auth"].get<uint64_t>(), probes);
  EXPECT_EQ(m2["peers"]["10.77.1.2:7711"]["rejected"].value("bad_auth", uint64_t(0)), replies)
      << "every forged reply read by n2's initiator is refused";
  EXPECT_EQ(t1.sync_rounds().size(), 600u);
  EXPECT_EQ(t2.sync_rounds().size(), 600u);
  // Junk sent to n2's send-only socket is dropped there: it cannot crowd out the
  // transmit stamps.
  EXPECT_EQ(m2["peers"]["10.77.1.2:7711"]["kernel_bad"].get<uint64_t>(), 0u);
  EXPECT_EQ(m1["authenticated"], true);
  // The translation of n2 onto n1 holds the truth at every round's instant.
  auto tr = testutil::run(
      bin + " translate " + (tmp / "n1") + " " + (tmp / "n2") + " --reference n1 -o " + (tmp / "merged"), tmp);
  ASSERT_EQ(tr.status, 0) << tr.err;
  EXPECT_EQ(tr.err.find("unauthenticated"), std::string::npos) << tr.err;
  TraceReader m(tmp / "merged");
  ClockTransform s1 = ClockTransform::from_json(t1.meta()["simulated_clock"]);
  ClockTransform s2 = ClockTransform::from_json(t2.meta()["simulated_clock"]);
  RelationPtr rel;
  for (const auto& n : m.meta()["translated"]["nodes"])
    if (n["node"] == "n2") rel = relation_from_json(n["to_reference"]);
  ASSERT_TRUE(rel);
  size_t checked = 0, outside = 0;
  for (const SyncRound& r : t2.sync_rounds()) {
    if (!r.kernel_ok) continue;
    Bound b = rel->at(int64_t(r.t1));
    long double truth = (long double)s1.apply(s2.undo(r.t1));
    checked++;
    outside += !b.contains(truth);
  }
  EXPECT_GT(checked, 500u);
  EXPECT_EQ(outside, 0u) << "of " << checked;
}

namespace {

// Receives and counts UDP datagrams on 0.0.0.0:port of a namespace until stopped.
struct Counter {
  int fd;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> datagrams{0}, bytes{0}, largest{0};
  std::thread th;
  Counter(const std::string& ns, uint16_t port) {
    fd = testbed::socket_in(ns, AF_INET, SOCK_DGRAM);
    testbed::Addr a = testbed::make_addr("0.0.0.0", port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0) ADD_FAILURE() << "bind " << port;
    th = std::thread([this] {
      char buf[2048];
      while (!stop) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) continue;
        datagrams++;
        bytes += uint64_t(n);
        if (uint64_t(n) > largest) largest = uint64_t(n);
      }
    });
  }
  ~Counter() {
    stop = true;
    th.join();
    close(fd);
  }
};

}  // namespace

// An attacker in n3 sends probes whose IPv4 source is n2's address (raw socket,
// forged header) to n1's responder, with n2's port 40001 as reply port. n2 counts
// what arrives there: at most one datagram per probe, none larger than the probe.
TEST(MinrttSecurity, SpoofedProbesNeverGetMoreBytesBackThanTheyCarried) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("ms", 3, "--delay 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  testutil::Proc d(in_ns(tb.ns(1), testutil::cptrace_bin() + " minrttd --insecure --listen 10.77.1.2:7711 --node n1 "
                                                             "--stats-interval 0"),
                   tmp / "d.out", tmp / "d.err");
  ASSERT_TRUE(d.wait_for("listening on 10.77.1.2:7711", 10)) << testutil::read_file(d.err_path);
  Counter victim(tb.ns(2), 40001);
  int raw = testbed::socket_in(tb.ns(3), AF_INET, SOCK_RAW, IPPROTO_RAW);
  ASSERT_GE(raw, 0) << strerror(errno);
  const int n = 1000;
  const size_t probe_bytes = minrtt::kMessageBytes;
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    minrtt::Message p;
    p.type = minrtt::MsgType::Probe;
    p.session = 0x5b00f + i;
    p.seq = 1;
    p.reply_port = 40001;
    p.node = "n2";
    if (i % 2) p.a = 0x1234, p.b = uint64_t(i);  // a made-up cookie changes nothing
    auto payload = minrtt::encode(p, nullptr);
    uint8_t pkt[sizeof(iphdr) + sizeof(udphdr) + minrtt::kMessageBytes] = {};
    auto* ip = reinterpret_cast<iphdr*>(pkt);
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons(sizeof pkt);
    inet_pton(AF_INET, "10.77.2.2", &ip->saddr);  // not ours: n2's
    inet_pton(AF_INET, "10.77.1.2", &ip->daddr);
    auto* udp = reinterpret_cast<udphdr*>(pkt + sizeof(iphdr));
    udp->source = htons(40001);
    udp->dest = htons(7711);
    udp->len = htons(sizeof(udphdr) + probe_bytes);
    udp->check = 0;  // none (IPv4)
    memcpy(pkt + sizeof(iphdr) + sizeof(udphdr), payload.data(), payload.size());
    testbed::Addr to = testbed::make_addr("10.77.1.2", 7711);
    sent += sendto(raw, pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to.ss), to.len) == ssize_t(sizeof pkt);
    usleep(500);
  }
  close(raw);
  usleep(500000);
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait(10), 0);
  auto st = minrttd_stats(testutil::read_file(d.out_path));
  ASSERT_FALSE(st.is_null());
  fprintf(stderr,
          "  %d spoofed probes of %zu bytes: the spoofed address got %llu datagrams, %llu bytes, largest %llu; "
          "responder %s\n",
          sent, probe_bytes, (unsigned long long)victim.datagrams.load(), (unsigned long long)victim.bytes.load(),
          (unsigned long long)victim.largest.load(), st.dump().c_str());
  EXPECT_EQ(sent, n);
  EXPECT_GT(victim.datagrams.load(), 0u) << "the spoofed probes did not reach the responder: the test proves nothing";
  EXPECT_LE(victim.largest.load(), probe_bytes);
  EXPECT_LE(victim.datagrams.load(), uint64_t(sent)) << "more than one datagram for a probe";
  EXPECT_LE(victim.bytes.load(), uint64_t(sent) * probe_bytes);
  EXPECT_EQ(st["answered"].get<uint64_t>(), 0u);
  EXPECT_EQ(st.value("cookies", uint64_t(0)), victim.datagrams.load());
}

namespace {

// An on-path attacker: copies every datagram n1's responder sends to n2 (seen
// on n2's link with a packet socket) and sends each again, as captured, from n3
// (raw socket: the same source address, ports and authenticated payload), at
// once and again `later` afterwards, when the initiator waits for another
// round's answers. The copies leave n3 with TTL 200, so the sniffer skips them.
struct ReplayAttacker {
  int sniff, raw;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> captured{0}, injected{0};
  std::mutex mu;
  std::vector<uint64_t> sent_at;  // the TSC after each copy was sent (one TSC in every namespace)
  std::thread th;
  ReplayAttacker(const std::string& victim_ns, const std::string& attacker_ns, std::chrono::milliseconds later) {
    sniff = testbed::socket_in(victim_ns, AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    raw = testbed::socket_in(attacker_ns, AF_INET, SOCK_RAW, IPPROTO_RAW);
    th = std::thread([this, later] {
      std::vector<std::pair<std::chrono::steady_clock::time_point, std::vector<uint8_t>>> queue;
      uint8_t buf[2048];
      while (!stop) {
        pollfd p{sniff, POLLIN, 0};
        if (poll(&p, 1, 1) > 0) {
          sockaddr_ll from{};
          socklen_t fl = sizeof from;
          ssize_t n = recvfrom(sniff, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
          if (n > ssize_t(sizeof(iphdr) + sizeof(udphdr)) && from.sll_pkttype == PACKET_HOST && is_answer(buf)) {
            captured++;
            std::vector<uint8_t> pkt(buf, buf + n);
            auto* ip = reinterpret_cast<iphdr*>(pkt.data());
            ip->ttl = 200;  // the kernel fills the header checksum
            // As captured on a veth the UDP checksum may be the offload's partial
            // sum: sent without one (IPv4 allows it; the MAC covers the payload).
            reinterpret_cast<udphdr*>(pkt.data() + ip->ihl * 4)->check = 0;
            const auto now = std::chrono::steady_clock::now();
            queue.push_back({now, pkt});
            queue.push_back({now + later, pkt});
          }
        }
        const auto now = std::chrono::steady_clock::now();
        for (auto it = queue.begin(); it != queue.end();) {
          if (it->first > now) {
            ++it;
            continue;
          }
          testbed::Addr to = testbed::make_addr("10.77.2.2", 0);
          if (sendto(raw, it->second.data(), it->second.size(), 0, reinterpret_cast<sockaddr*>(&to.ss), to.len) ==
              ssize_t(it->second.size())) {
            injected++;
            std::lock_guard<std::mutex> l(mu);
            sent_at.push_back(__rdtsc());
          }
          it = queue.erase(it);
        }
      }
    });
  }
  // n1's answers to n2 as they arrive (from whatever port the responder sends;
  // not a copy: those come with TTL 199).
  static bool is_answer(const uint8_t* b) {
    const auto* ip = reinterpret_cast<const iphdr*>(b);
    in_addr src{};
    inet_pton(AF_INET, "10.77.1.2", &src);
    return ip->protocol == IPPROTO_UDP && ip->saddr == src.s_addr && ip->ttl < 100;
  }
  ~ReplayAttacker() {
    stop = true;
    th.join();
    close(sniff);
    close(raw);
  }
};

}  // namespace

// Authenticated answers captured on the path and replayed to the initiator, in
// the round they answer and in later ones: each is refused and counted (as a
// replay of a seen message, or as an answer to another round), no replay becomes
// a round, and the rounds are those of a clean run: all there, all causal.
TEST(MinrttSecurity, RepliesReplayedToTheInitiatorAreRefusedAndCounted) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("mp", 3, "--delay 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  auto kg = testutil::run(testutil::cptrace_bin() + " keygen -o " + (tmp / "key"), tmp);
  ASSERT_EQ(kg.status, 0) << kg.err;
  testutil::Proc d(in_ns(tb.ns(1), testutil::cptrace_bin() + " minrttd --listen 10.77.1.2:7711 --node n1 --key " +
                                       (tmp / "key") + " --stats-interval 0"),
                   tmp / "d.out", tmp / "d.err");
  ASSERT_TRUE(d.wait_for("listening on 10.77.1.2:7711", 10)) << testutil::read_file(d.err_path);
  uint64_t captured = 0, injected = 0;
  std::vector<uint64_t> sent_at;
  int st = 0;
  {
    ReplayAttacker attacker(tb.ns(2), tb.ns(3), std::chrono::milliseconds(30));
    ASSERT_GE(attacker.sniff, 0) << strerror(errno);
    ASSERT_GE(attacker.raw, 0) << strerror(errno);
    auto sync =
        testutil::run(in_ns(tb.ns(2), testutil::cptrace_bin() + " sync --node n2 --peers 10.77.1.2:7711 --key " +
                                          (tmp / "key") + " --sync-rounds 100 -o " + (tmp / "n2")),
                      tmp);
    st = sync.status;
    ASSERT_EQ(st, 0) << sync.err;
    usleep(100000);  // the last copies sent
    captured = attacker.captured, injected = attacker.injected;
    std::lock_guard<std::mutex> l(attacker.mu);
    sent_at = attacker.sent_at;
  }
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait(10), 0);

  TraceReader r(tmp / "n2");
  ASSERT_FALSE(r.error()) << r.error()->what();
  const std::vector<SyncRound> rounds = r.sync_rounds();
  ASSERT_EQ(rounds.size(), 100u) << "a replay taken as a round, or a round lost to the replays";
  std::set<uint64_t> seqs;
  const double hz = r.clock_map().tsc_hz();
  for (const SyncRound& x : rounds) {
    seqs.insert(x.seq);
    ASSERT_TRUE(x.kernel_ok);
    EXPECT_GE(int64_t(x.t2 - x.t1), 0);
    EXPECT_GE(int64_t(x.t4 - x.t3), 0);
    // 20 us each way: a replayed answer would be a round trip longer than the round's own.
    EXPECT_GE(double(int64_t(x.t4 - x.t1) - int64_t(x.t3 - x.t2)), 40e-6 * hz * 0.99) << x.seq;
  }
  EXPECT_EQ(seqs.size(), rounds.size());
  const nlohmann::json& peer = r.meta()["minrtt"]["peers"]["10.77.1.2:7711"];
  uint64_t refused = 0;
  const nlohmann::json rejected = peer.value("rejected", nlohmann::json::object());
  for (const auto& n : rejected) refused += n.get<uint64_t>();
  fprintf(stderr, "  replay: %llu answers captured, %llu copies injected; the initiator refused %llu: %s\n",
          (unsigned long long)captured, (unsigned long long)injected, (unsigned long long)refused, peer.dump().c_str());
  EXPECT_GE(captured, 200u) << "a reply and a follow-up per round";
  EXPECT_EQ(injected, 2 * captured);
  // A copy sent well before the last round's probe (20 ms: the path takes 20 us)
  // waits in the initiator's socket until an await reads it, before that
  // round's own answers: each is refused. Later ones may find the socket closed.
  uint64_t last_probe = 0;
  for (const SyncRound& x : rounds) last_probe = std::max(last_probe, x.u1);
  const uint64_t early = std::count_if(sent_at.begin(), sent_at.end(),
                                       [&](uint64_t t) { return double(t) < double(last_probe) - 0.02 * hz; });
  fprintf(stderr, "  %llu copies sent 20 ms or more before the last round\n", (unsigned long long)early);
  EXPECT_GE(early, 100u) << "too few copies in time to prove anything";
  EXPECT_GE(refused, early);
  EXPECT_LE(refused, injected);
  EXPECT_EQ(rejected.value("bad_auth", uint64_t(0)), 0u)
      << "a copy is authentic: refused for what it answers, not for its MAC";
}
