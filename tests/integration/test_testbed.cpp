// The namespace testbed (tools/testbed.sh + tools/netdelay.cpp): does it delay, drop,
// keep order, carry TCP/UDP/ICMP over IPv4 and IPv6, and clean up after itself?
//
// Needs root and network namespaces; skips (loudly) otherwise. Every test creates its own
// testbed under a unique prefix and tears it down in a guard's destructor. Traffic stays
// inside the namespaces the test creates. All namespaces share one CLOCK_MONOTONIC, so
// the one-way delays measured here are exact up to the stacks' own latency. That latency,
// and how late the forwarder wakes up for a deadline, depend on the machine and its load:
// upper bounds come from reference paths probed in the same rounds (and from the
// forwarder's own lateness statistics), never from a fixed number of microseconds.

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testbed_util.h"

using namespace testbed;

namespace {

struct Probe {
  uint64_t magic;
  uint64_t seq;
  int64_t t_send;  // client, just before sendto
  int64_t t_server;  // server, right after recvfrom
};
constexpr uint64_t kMagic = 0x6370747462656421ull;

// UDP server in a node namespace: echoes probes with its receive time, records sequence
// numbers. Runs until stop() or a hard time limit.
class UdpServer {
 public:
  UdpServer(const std::string& ns, const std::string& ip, uint16_t port, bool echo) : echo_(echo) {
    Addr a = make_addr(ip, port);
    fd_ = socket_in(ns, a.family(), SOCK_DGRAM);
    if (fd_ < 0) return;
    int buf = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    set_timeout(fd_, 50);
    th_ = std::thread([this] { loop(); });
  }
  ~UdpServer() { stop(); }
  bool ok() const { return fd_ >= 0; }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Waits until `n` probes arrived or `ms` passed.
  void wait_for(size_t n, int ms) const {
    const int64_t deadline = mono_ns() + int64_t(ms) * 1000000;
    while (received_.load() < n && mono_ns() < deadline) usleep(1000);
  }
  // valid after stop()
  std::vector<uint64_t> seqs;

 private:
  void loop() {
    const int64_t deadline = mono_ns() + 120LL * 1000000000LL;
    while (!stop_ && mono_ns() < deadline) {
      Probe p;
      sockaddr_storage from;
      socklen_t fl = sizeof from;
      ssize_t n = recvfrom(fd_, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&from), &fl);
      if (n != ssize_t(sizeof p) || p.magic != kMagic) continue;
      p.t_server = mono_ns();
      seqs.push_back(p.seq);
      received_++;
      if (echo_) sendto(fd_, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&from), fl);
    }
  }
  int fd_ = -1;
  bool echo_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> received_{0};
  std::thread th_;
};

struct Sample {
  double rtt_us, fwd_us, back_us;
};
struct EchoResult {
  std::vector<Sample> samples;
  int sent = 0;
  int out_of_order = 0;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[size_t(p * double(v.size() - 1) + 0.5)];
}
template <class F>
std::vector<double> col(const std::vector<Sample>& s, F f) {
  std::vector<double> v;
  for (auto& x : s) v.push_back(f(x));
  return v;
}

// One echo probe numbered i on socket fd to `to`: waits for its echo (dropping stale
// ones from earlier timeouts) and adds the sample to r.
void echo_once(int fd, const Addr& to, int i, EchoResult& r, uint64_t& expect) {
  Probe p{kMagic, uint64_t(i), mono_ns(), 0};
  if (sendto(fd, &p, sizeof p, 0, reinterpret_cast<const sockaddr*>(&to.ss), to.len) != ssize_t(sizeof p)) return;
  r.sent++;
  for (int tries = 0; tries < 4; tries++) {
    Probe q;
    ssize_t n = recv(fd, &q, sizeof q, 0);
    int64_t t = mono_ns();
    if (n != ssize_t(sizeof q)) break;
    if (q.magic != kMagic) continue;
    if (q.seq < expect) r.out_of_order++;
    expect = q.seq + 1;
    if (q.seq != uint64_t(i)) continue;
    r.samples.push_back(
        {double(t - q.t_send) / 1e3, double(q.t_server - q.t_send) / 1e3, double(t - q.t_server) / 1e3});
    break;
  }
}

// `count` echo probes from node `from_ns` to server ip:port, one at a time, `gap_us` apart.
EchoResult echo_probes(const std::string& from_ns, const std::string& ip, uint16_t port, int count, int gap_us) {
  EchoResult r;
  Addr to = make_addr(ip, port);
  int fd = socket_in(from_ns, to.family(), SOCK_DGRAM);
  if (fd < 0) return r;
  set_timeout(fd, 100);
  uint64_t expect = 0;
  const int64_t deadline = mono_ns() + 60LL * 1000000000LL;
  for (int i = 0; i < count && mono_ns() < deadline; i++) {
    echo_once(fd, to, i, r, expect);
    timespec gap{0, long(gap_us) * 1000};
    nanosleep(&gap, nullptr);
  }
  close(fd);
  return r;
}

// An echo server as seen from a client namespace.
struct Target {
  std::string from_ns, ip;
  uint16_t port;
};

// The same, round robin over several targets: probe i goes to each in turn, so every
// path is measured under the same load on the machine and in the forwarders.
std::vector<EchoResult> echo_probes_interleaved(const std::vector<Target>& targets, int count, int gap_us) {
  std::vector<EchoResult> r(targets.size());
  std::vector<int> fds;
  std::vector<Addr> tos;
  std::vector<uint64_t> expect(targets.size(), 0);
  for (auto& t : targets) {
    tos.push_back(make_addr(t.ip, t.port));
    fds.push_back(socket_in(t.from_ns, tos.back().family(), SOCK_DGRAM));
    if (fds.back() >= 0) set_timeout(fds.back(), 100);
  }
  const int64_t deadline = mono_ns() + 60LL * 1000000000LL;
  for (int i = 0; i < count && mono_ns() < deadline; i++)
    for (size_t k = 0; k < targets.size(); k++) {
      if (fds[k] >= 0) echo_once(fds[k], tos[k], i, r[k], expect[k]);
      timespec gap{0, long(gap_us) * 1000};
      nanosleep(&gap, nullptr);
    }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  return r;
}

// Percentile p of one member of the samples.
double at(const EchoResult& e, double Sample::*m, double p) {
  return pct(col(e.samples, [m](const Sample& s) { return s.*m; }), p);
}

// How much the low end of a path's one-way delays moves from sample to sample on this
// machine, now: the 10th percentile minus the minimum, the largest over the paths and
// directions given. Two floors of paths configured alike differ by up to twice that.
double floor_noise(const std::vector<const EchoResult*>& rs) {
  double n = 0;
  for (auto* r : rs)
    for (auto m : {&Sample::fwd_us, &Sample::back_us}) n = std::max(n, at(*r, m, .1) - at(*r, m, 0));
  return n;
}

// A counter from the forwarder's own statistics (tools/netdelay.cpp --stats, printed
// by `testbed.sh status`); -1 if absent.
double forwarder_stat(Testbed& tb, const std::string& key) {
  auto st = tb.status();
  auto pos = st.out.find(key + "=");
  return pos == std::string::npos ? -1 : atof(st.out.c_str() + pos + key.size() + 1);
}

void report(const char* what, const EchoResult& r) {
  auto rtt = col(r.samples, [](const Sample& s) { return s.rtt_us; });
  auto fwd = col(r.samples, [](const Sample& s) { return s.fwd_us; });
  auto back = col(r.samples, [](const Sample& s) { return s.back_us; });
  fprintf(stderr,
          "  [%s] %zu/%d echoes; RTT us min %.1f p50 %.1f p99 %.1f | one-way fwd min %.1f p50 %.1f | back min "
          "%.1f p50 %.1f\n",
          what, r.samples.size(), r.sent, pct(rtt, 0), pct(rtt, .5), pct(rtt, .99), pct(fwd, 0), pct(fwd, .5),
          pct(back, 0), pct(back, .5));
}

#define UP_OR_FAIL(tb) ASSERT_TRUE((tb).ok()) << "testbed up failed:\n" << (tb).output()

}  // namespace

// Sends n numbered UDP probes from namespace ns to `to`, gap_ns apart; returns
// how many were sent whole (-1 if no socket could be made).
int send_probes(const std::string& ns, const Addr& to, int n, long gap_ns) {
  int fd = socket_in(ns, AF_INET, SOCK_DGRAM);
  if (fd < 0) return -1;
  int sent = 0;
  for (int i = 0; i < n; i++) {
    Probe p{kMagic, uint64_t(i), mono_ns(), 0};
    if (sendto(fd, &p, sizeof p, 0, reinterpret_cast<const sockaddr*>(&to.ss), to.len) == ssize_t(sizeof p)) sent++;
    timespec gap{0, gap_ns};
    nanosleep(&gap, nullptr);
  }
  close(fd);
  return sent;
}

TEST(Testbed, DelayIsHeldBothWays) {
  REQUIRE_TESTBED();
  Testbed tb("dly", 2, "--delay 200");
  UP_OR_FAIL(tb);
  // A reference without delay, probed in turn with the delayed one: what the stacks
  // and a forwarder add on this machine, now.
  Testbed ref("dlz", 2, "--delay 0");
  UP_OR_FAIL(ref);
  UdpServer srv(tb.ns(2), "10.77.2.2", 7001, true), srv0(ref.ns(2), "10.77.2.2", 7001, true);
  ASSERT_TRUE(srv.ok());
  ASSERT_TRUE(srv0.ok());
  auto rs = echo_probes_interleaved({{tb.ns(1), "10.77.2.2", 7001}, {ref.ns(1), "10.77.2.2", 7001}}, 200, 500);
  srv.stop();
  srv0.stop();
  const EchoResult &r = rs[0], &r0 = rs[1];
  report("200us each way", r);
  report("no delay", r0);
  ASSERT_EQ(r.sent, 200);
  EXPECT_GE(r.samples.size(), 198u) << "no loss is configured";
  ASSERT_GE(r0.samples.size(), 190u);
  // Never earlier than configured, on any machine.
  EXPECT_GE(at(r, &Sample::rtt_us, 0), 400.0);
  EXPECT_GE(at(r, &Sample::fwd_us, 0), 200.0);
  EXPECT_GE(at(r, &Sample::back_us, 0), 200.0);
  // And not later than configured plus what this run measured: the undelayed path's
  // floor, the delaying forwarder's own transmit lateness (it sleeps toward each
  // deadline and wakes up late by this much), and the floors' noise.
  double late = forwarder_stat(tb, "late_us_p99");
  ASSERT_GE(late, 0) << tb.status().out;
  double tol = late + 2 * floor_noise({&r, &r0});
  fprintf(stderr, "  forwarder lateness p99 %.0f us, tolerance %.1f us\n", late, tol);
  for (auto m : {&Sample::fwd_us, &Sample::back_us}) EXPECT_LE(at(r, m, 0) - 200.0, at(r0, m, 0) + tol);
  EXPECT_EQ(r.out_of_order, 0);
}

TEST(Testbed, AsymmetryAddsExactlyToOneDirection) {
  REQUIRE_TESTBED();
  // Node 2 is the one under test: 300 us more toward it, 100 us more on everything
  // leaving it. Nodes 3 and 4 are symmetric references through the same forwarder
  // with the one-way delays node 2's directions must get: 500 (3) and 300 (4) each way.
  Testbed tb("asy", 4,
             "--delay 200 --asym 2:300 --asym-from 2:100 --asym 3:300 --asym-from 3:300 "
             "--asym 4:100 --asym-from 4:100");
  UP_OR_FAIL(tb);
  std::vector<std::unique_ptr<UdpServer>> srv;
  std::vector<Target> to;
  for (int k = 2; k <= 4; k++) {
    std::string ip = "10.77." + std::to_string(k) + ".2";
    srv.push_back(std::make_unique<UdpServer>(tb.ns(k), ip, 7002, true));
    ASSERT_TRUE(srv.back()->ok());
    to.push_back({tb.ns(1), ip, 7002});
  }
  auto r = echo_probes_interleaved(to, 200, 300);
  for (auto& s : srv) s->stop();
  report("node 2: to +300, from +100", r[0]);
  report("node 3: 500 each way", r[1]);
  report("node 4: 300 each way", r[2]);
  for (auto& x : r) ASSERT_GE(x.samples.size(), 190u) << "no loss is configured";
  // Never earlier than configured, on any machine.
  EXPECT_GE(at(r[0], &Sample::fwd_us, 0), 500.0);
  EXPECT_GE(at(r[0], &Sample::back_us, 0), 300.0);
  EXPECT_GE(at(r[1], &Sample::fwd_us, 0), 500.0);
  EXPECT_GE(at(r[1], &Sample::back_us, 0), 500.0);
  EXPECT_GE(at(r[2], &Sample::fwd_us, 0), 300.0);
  EXPECT_GE(at(r[2], &Sample::back_us, 0), 300.0);
  // What the stacks and the forwarder add on top of a configured delay varies with the
  // machine and with the delay itself (a longer sleep wakes up later), so node 2's
  // directions are compared with the reference paths configured alike, measured in
  // the same rounds. Two floors differ by up to twice the floors' noise (of every path
  // compared: node 2's own floor is one sample too); and the two directions of a
  // reference, configured alike, show how far direction alone moves one.
  double noise = floor_noise({&r[0], &r[1], &r[2]});
  for (int k : {1, 2}) noise = std::max(noise, std::abs(at(r[k], &Sample::fwd_us, 0) - at(r[k], &Sample::back_us, 0)));
  double tol = 2 * noise;
  fprintf(stderr, "  floor noise %.1f us -> tolerance %.1f us\n", noise, tol);
  // Toward node 2 like toward node 3 (500), from node 2 like from node 4 (300).
  EXPECT_NEAR(at(r[0], &Sample::fwd_us, 0), at(r[1], &Sample::fwd_us, 0), tol);
  EXPECT_NEAR(at(r[0], &Sample::back_us, 0), at(r[2], &Sample::back_us, 0), tol);
  EXPECT_EQ(r[0].out_of_order + r[1].out_of_order + r[2].out_of_order, 0);
}

TEST(Testbed, JitterStaysInRangeAndKeepsOrder) {
  REQUIRE_TESTBED();
  // 1 ms of base delay: the forwarder has that long to wake up for a packet before its
  // deadline, so a late wake-up on a busy machine cannot swallow the jitter (with
  // 200 us, a packet noticed 300 us late leaves at once whatever its draw).
  Testbed tb("jit", 2, "--delay 1000 --jitter 300 --seed 7");
  UP_OR_FAIL(tb);
  // One-way delays spread over [1000, 1300] us: echo probes, spaced so FIFO does not
  // bind, in turn with a reference testbed without jitter (what this machine adds).
  Testbed ref("jrf", 2, "--delay 1000");
  UP_OR_FAIL(ref);
  UdpServer echo(tb.ns(2), "10.77.2.2", 7004, true), echo0(ref.ns(2), "10.77.2.2", 7004, true);
  ASSERT_TRUE(echo.ok());
  ASSERT_TRUE(echo0.ok());
  auto rs = echo_probes_interleaved({{tb.ns(1), "10.77.2.2", 7004}, {ref.ns(1), "10.77.2.2", 7004}}, 200, 500);
  echo.stop();
  echo0.stop();
  // Each forwarder's own transmit lateness over these probes (before the burst below):
  // on a busy machine the two paths are not late by the same amounts at the same
  // moments, and the jittered path's few small draws may all meet a late wake-up.
  double late = std::max(forwarder_stat(tb, "late_us_p99"), forwarder_stat(ref, "late_us_p99"));
  ASSERT_GE(late, 0) << tb.status().out;
  const EchoResult &r = rs[0], &r0 = rs[1];
  report("1000 + U[0,300] each way", r);
  report("1000 each way, no jitter", r0);
  ASSERT_GE(r.samples.size(), 190u);
  ASSERT_GE(r0.samples.size(), 190u);
  auto f = [](const EchoResult& e, double p) { return at(e, &Sample::fwd_us, p); };
  EXPECT_GE(f(r, 0), 1000.0);
  // The machine's share, from the reference: the floors' noise, the spread of its
  // one-way delays (10th to 90th percentile), and the forwarders' lateness p99.
  double noise = 2 * floor_noise({&r0}), spread0 = f(r0, .9) - f(r0, .1);
  fprintf(stderr, "  floor noise %.1f us, spread without jitter %.1f us, forwarder lateness p99 %.0f us\n", noise,
          spread0, late);
  // Statistics of 200 draws of U[0, 300]: the smallest is below 30 us (probability of
  // not: 0.9^200 < 1e-9); the 10-90% spread is 240 us, its standard deviation ~9 us;
  // the median 150 us, standard deviation ~11 us. 40 and 50 us are over 4 of those.
  // Lateness only adds to a delay, so the spread's lower bound needs no allowance.
  EXPECT_LE(f(r, 0) - f(r0, 0), 30.0 + noise + late) << "some packets should see little jitter";
  EXPECT_GE(f(r, .9) - f(r, .1), 240.0 - 40.0) << "jitter seems not applied";
  EXPECT_NEAR(f(r, .5) - f(r0, .5), 150.0, 50.0 + spread0 + late);

  // Back-to-back burst: with 300 us of jitter and 20 us spacing, independent delays would
  // reorder most packets; the forwarder keeps each path FIFO.
  UdpServer srv(tb.ns(2), "10.77.2.2", 7003, false);
  ASSERT_TRUE(srv.ok());
  Addr to = make_addr("10.77.2.2", 7003);
  ASSERT_EQ(send_probes(tb.ns(1), to, 500, 20000), 500);
  srv.wait_for(495, 10000);
  srv.stop();
  ASSERT_GE(srv.seqs.size(), 495u);
  EXPECT_TRUE(std::is_sorted(srv.seqs.begin(), srv.seqs.end())) << "jitter reordered packets of one flow";
}

TEST(Testbed, LossIsAboutTheConfiguredRate) {
  REQUIRE_TESTBED();
  Testbed tb("los", 2, "--delay 50 --loss 30");
  UP_OR_FAIL(tb);
  UdpServer srv(tb.ns(2), "10.77.2.2", 7005, false);
  ASSERT_TRUE(srv.ok());
  Addr to = make_addr("10.77.2.2", 7005);
  const int N = 1000;
  int sent = send_probes(tb.ns(1), to, N, 50000);
  usleep(200000);
  srv.stop();
  ASSERT_EQ(sent, N);
  std::set<uint64_t> uniq(srv.seqs.begin(), srv.seqs.end());
  EXPECT_EQ(uniq.size(), srv.seqs.size()) << "duplicated packets";
  double loss = 1.0 - double(uniq.size()) / N;
  fprintf(stderr, "  [30%% loss] %zu/%d received, loss %.1f%%\n", uniq.size(), N, loss * 100);
  // Binomial(1000, 0.3): sd 1.45 %; 20..40 % is about +-7 sd.
  EXPECT_GE(loss, 0.20);
  EXPECT_LE(loss, 0.40);
}

TEST(Testbed, TcpTransferThroughDelay) {
  REQUIRE_TESTBED();
  Testbed tb("tcp", 2, "--delay 200 --jitter 50");
  UP_OR_FAIL(tb);
  const size_t kBytes = 4u << 20;
  Addr a = make_addr("10.77.2.2", 7006);
  int lfd = socket_in(tb.ns(2), AF_INET, SOCK_STREAM);
  ASSERT_GE(lfd, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a.ss), a.len), 0) << strerror(errno);
  ASSERT_EQ(listen(lfd, 1), 0);
  std::atomic<size_t> got{0};
  std::atomic<bool> pattern_ok{true};
  std::thread server([&] {
    pollfd pf{lfd, POLLIN, 0};
    if (poll(&pf, 1, 20000) != 1) return;
    int c = accept(lfd, nullptr, nullptr);
    if (c < 0) return;
    set_timeout(c, 20000);
    std::vector<uint8_t> buf(1 << 16);
    size_t total = 0;
    const int64_t deadline = mono_ns() + 30LL * 1000000000LL;
    while (mono_ns() < deadline) {
      ssize_t n = recv(c, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; i++)
        if (buf[size_t(i)] != uint8_t((total + size_t(i)) % 251)) pattern_ok = false;
      total += size_t(n);
    }
    got = total;
    uint64_t t = total;
    send(c, &t, sizeof t, MSG_NOSIGNAL);
    close(c);
  });
  int cfd = socket_in(tb.ns(1), AF_INET, SOCK_STREAM);
  ASSERT_GE(cfd, 0);
  set_timeout(cfd, 20000);
  int64_t t0 = mono_ns();
  bool connected = connect(cfd, reinterpret_cast<sockaddr*>(&a.ss), a.len) == 0;
  int64_t t_conn = mono_ns() - t0;
  size_t sent = 0;
  uint64_t ack = 0;
  if (connected) {
    std::vector<uint8_t> data(kBytes);
    for (size_t i = 0; i < kBytes; i++) data[i] = uint8_t(i % 251);
    while (sent < kBytes) {
      ssize_t n = send(cfd, data.data() + sent, kBytes - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += size_t(n);
    }
    shutdown(cfd, SHUT_WR);
    if (recv(cfd, &ack, sizeof ack, MSG_WAITALL) != ssize_t(sizeof ack)) ack = 0;
  }
  int64_t t_all = mono_ns() - t0;
  close(cfd);
  server.join();
  close(lfd);
  ASSERT_TRUE(connected) << strerror(errno);
  fprintf(stderr, "  [tcp] connect %.0f us (>= 1 RTT = 400 us), %zu bytes in %.1f ms\n", double(t_conn) / 1e3, sent,
          double(t_all) / 1e6);
  EXPECT_GE(t_conn, 400000) << "SYN/SYN-ACK took less than one delayed round trip";
  EXPECT_EQ(sent, kBytes);
  EXPECT_EQ(got.load(), kBytes);
  EXPECT_EQ(ack, kBytes);
  EXPECT_TRUE(pattern_ok.load()) << "payload corrupted on the way";
}

TEST(Testbed, Ipv6UdpAndPing) {
  REQUIRE_TESTBED();
  Testbed tb("six", 3, "--delay 200");
  UP_OR_FAIL(tb);
  UdpServer srv(tb.ns(3), "fd77::3:2", 7007, true);
  ASSERT_TRUE(srv.ok());
  auto r = echo_probes(tb.ns(1), "fd77::3:2", 7007, 100, 1000);
  srv.stop();
  report("IPv6 200us each way", r);
  ASSERT_GE(r.samples.size(), 98u);
  EXPECT_GE(pct(col(r.samples, [](const Sample& s) { return s.rtt_us; }), 0), 400.0);

  // ICMP echo (ping sockets) both families, node 2 -> node 3 / node 1.
  for (const std::string ip : {"10.77.3.2", "fd77::1:2"}) {
    bool v6 = ip.find(':') != std::string::npos;
    int fd = socket_in(tb.ns(2), v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, v6 ? int(IPPROTO_ICMPV6) : int(IPPROTO_ICMP));
    ASSERT_GE(fd, 0) << "ping socket: " << strerror(errno);
    set_timeout(fd, 200);
    Addr to = make_addr(ip, 0);
    int replies = 0;
    double min_rtt = 1e9;
    for (int i = 0; i < 20; i++) {
      uint8_t pkt[64] = {};
      pkt[0] = v6 ? uint8_t(ICMP6_ECHO_REQUEST) : uint8_t(ICMP_ECHO);
      pkt[7] = uint8_t(i);
      int64_t t = mono_ns();
      if (sendto(fd, pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to.ss), to.len) != ssize_t(sizeof pkt)) continue;
      uint8_t in[256];
      for (int tries = 0; tries < 3; tries++) {
        ssize_t n = recv(fd, in, sizeof in, 0);
        if (n <= 0) break;
        if (in[7] != uint8_t(i)) continue;
        replies++;
        min_rtt = std::min(min_rtt, double(mono_ns() - t) / 1e3);
        break;
      }
      usleep(2000);
    }
    close(fd);
    fprintf(stderr, "  [ping %s] %d/20 replies, min RTT %.1f us\n", ip.c_str(), replies, min_rtt);
    EXPECT_GE(replies, 19) << ip;
    EXPECT_GE(min_rtt, 400.0) << ip;
  }
}

TEST(Testbed, DownRemovesEverythingAndIsIdempotent) {
  REQUIRE_TESTBED();
  std::string prefix;
  int fwd_pid = 0;
  {
    Testbed tb("dwn", 3, "--delay 100");
    UP_OR_FAIL(tb);
    prefix = tb.prefix();
    // `up` again over a live testbed replaces it cleanly.
    Testbed again("dwn", 3, "--delay 100");
    UP_OR_FAIL(again);
    auto st = again.status();
    EXPECT_EQ(st.status, 0) << st.out;
    EXPECT_NE(st.out.find("forwarder running"), std::string::npos) << st.out;
    auto pos = st.out.find("forwarder pid ");
    if (pos != std::string::npos) fwd_pid = atoi(st.out.c_str() + pos + 14);
    EXPECT_GT(fwd_pid, 0);
    auto d1 = again.down();
    EXPECT_EQ(d1.status, 0) << d1.out;
    auto d2 = again.down();
    EXPECT_EQ(d2.status, 0) << "second down must succeed too: " << d2.out;
  }  // both guards run `down` again here
  auto list = run("ip netns list");
  std::istringstream in(list.out);
  std::string line;
  while (std::getline(in, line)) EXPECT_NE(line.rfind(prefix, 0), 0u) << "left behind: " << line;
  if (fwd_pid > 0) {
    std::ifstream cmd("/proc/" + std::to_string(fwd_pid) + "/cmdline");
    std::string c((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    EXPECT_EQ(c.find("netdelay"), std::string::npos) << "forwarder still running";
  }
}
