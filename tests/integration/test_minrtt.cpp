// MinRTT on the namespace testbed: kernel-stamped rounds between every pair of 3
// nodes behind a delaying router (one link asymmetric), each node with its own
// simulated clock; hostile probes against a keyed daemon; rounds inside
// `cptrace record`.
//
// All namespaces share one physical TSC, so after undoing each node's simulated
// transform the four stamps of a round are on one clock: every round must be
// causal, each direction must take at least the configured one-way delay (the
// forwarder holds every packet that long after its own receive stamp, which is
// after the sender's transmit stamp), and the kernel round trip can never be
// shorter than the configured floor nor longer than the user-space one.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <thread>

#include "clock/clock_map.h"
#include "clock/clock_transform.h"
#include "sync/kernel_timestamps.h"
#include "sync/minrtt_protocol.h"
#include "record_util.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using testbed::skip_reason;

namespace {

double raw_tsc_hz() {
  ClockPoint a = sample_clock_point();
  usleep(100000);
  ClockPoint b = sample_clock_point();
  return ClockMap({a, b}).tsc_hz();
}

std::string in_ns(const std::string& ns, const std::string& cmd) { return "ip netns exec " + ns + " " + cmd; }

// A key made the way users make one; its path.
std::string make_key(const testutil::TempDir& tmp, const std::string& name = "key") {
  auto r = testutil::run(testutil::cptrace_bin() + " keygen -o " + (tmp / name), tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  return tmp / name;
}

struct NodeTrace {
  std::string name;
  ClockTransform sim;
  std::vector<SyncRound> rounds;
  nlohmann::json meta;
};

NodeTrace load(const std::string& dir) {
  TraceReader r(dir);
  EXPECT_FALSE(r.error()) << r.error()->what();
  NodeTrace t;
  t.meta = r.meta();
  t.name = r.meta().value("node", "");
  t.sim = ClockTransform::from_json(r.meta().value("simulated_clock", nlohmann::json()));
  t.rounds = r.sync_rounds();
  return t;
}

// Checks every kernel-stamped round of `a` against the physical floor; returns
// the minimum kernel and user RTT in raw ticks per peer.
struct PairFigures {
  uint64_t rounds = 0, kernel_ok = 0;
  int64_t kmin = INT64_MAX, umin = INT64_MAX;
};
std::map<std::string, PairFigures> check_rounds(const NodeTrace& a, const std::map<std::string, NodeTrace>& all,
                                                const std::map<std::string, double>& floor_us, double hz) {
  std::map<std::string, PairFigures> out;
  for (const SyncRound& r : a.rounds) {
    auto it = all.find(r.peer);
    if (it == all.end()) {
      ADD_FAILURE() << a.name << ": round with unknown peer '" << r.peer << "'";
      continue;
    }
    const ClockTransform& pb = it->second.sim;
    PairFigures& f = out[r.peer];
    f.rounds++;
    EXPECT_TRUE(r.user_ok);
    int64_t u1 = a.sim.undo(r.u1), u2 = pb.undo(r.u2), u3 = pb.undo(r.u3), u4 = a.sim.undo(r.u4);
    f.umin = std::min(f.umin, (u4 - u1) - (u3 - u2));
    if (!r.kernel_ok) continue;
    f.kernel_ok++;
    int64_t t1 = a.sim.undo(r.t1), t2 = pb.undo(r.t2), t3 = pb.undo(r.t3), t4 = a.sim.undo(r.t4);
    int64_t fwd_floor = int64_t(floor_us.at(a.name + ">" + r.peer) * hz / 1e6);
    int64_t back_floor = int64_t(floor_us.at(r.peer + ">" + a.name) * hz / 1e6);
    EXPECT_GE(t2, t1) << a.name << "->" << r.peer << " seq " << r.seq << ": receive before send";
    EXPECT_GE(t4, t3) << r.peer << "->" << a.name << " seq " << r.seq << ": receive before send";
    EXPECT_GE(t2 - t1, fwd_floor) << a.name << "->" << r.peer << " seq " << r.seq << " faster than the delay";
    EXPECT_GE(t4 - t3, back_floor) << r.peer << "->" << a.name << " seq " << r.seq << " faster than the delay";
    EXPECT_GE(t3, t2);
    f.kmin = std::min(f.kmin, (t4 - t1) - (t3 - t2));
  }
  return out;
}

}  // namespace

TEST(Minrtt, ThreeNodesAllPairsKernelRoundsAreCausalAndBeatUserSpace) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("mr", 3, "--delay 50 --jitter 10 --asym 3:40");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const double hz = raw_tsc_hz();
  const std::string key = make_key(tmp);
  // Different transforms per node: seconds of offset, +-tens to hundreds of ppm.
  const std::vector<std::string> sims = {"1500000000,35", "-2500000000,-120", "700000,180"};
  const std::vector<std::string> peers = {"10.77.2.2:7711,10.77.3.2:7711", "10.77.1.2:7711,10.77.3.2:7711",
                                          "[fd77::1:2]:7711,[fd77::2:2]:7711"};  // node 3 over IPv6
  std::vector<std::unique_ptr<testutil::Proc>> procs;
  for (int k = 1; k <= 3; ++k)
    procs.push_back(std::make_unique<testutil::Proc>(
        in_ns(tb.ns(k), testutil::cptrace_bin() + " sync --listen [::]:7711 --node n" + std::to_string(k) +
                            " --peers " + peers[k - 1] + " --key " + key +
                            " --sync-rounds 100 --sync-wait 20 --simulate-clock " + sims[k - 1] + " -o " +
                            (tmp / ("n" + std::to_string(k)))),
        tmp / ("out" + std::to_string(k)), tmp / ("err" + std::to_string(k))));
  for (int k = 0; k < 3; ++k) {
    int st = procs[k]->wait(120);
    ASSERT_EQ(st, 0) << testutil::read_file(procs[k]->err_path);
  }
  std::map<std::string, NodeTrace> all;
  for (int k = 1; k <= 3; ++k) {
    NodeTrace t = load(tmp / ("n" + std::to_string(k)));
    ASSERT_TRUE(t.sim.enabled) << "meta.json lacks simulated_clock";
    all[t.name] = t;
  }
  // Configured one-way floors: delay + asym(destination).
  std::map<std::string, double> floor_us;
  for (int i = 1; i <= 3; ++i)
    for (int j = 1; j <= 3; ++j) floor_us["n" + std::to_string(i) + ">n" + std::to_string(j)] = 50 + (j == 3 ? 40 : 0);
  for (auto& [name, t] : all) {
    auto figs = check_rounds(t, all, floor_us, hz);
    ASSERT_EQ(figs.size(), 2u) << name << " must have rounds with both peers";
    for (auto& [peer, f] : figs) {
      EXPECT_EQ(f.rounds, 100u) << name << "->" << peer;
      EXPECT_EQ(f.kernel_ok, f.rounds) << name << "->" << peer << ": every round has kernel stamps on a veth path";
      double floor_rtt = floor_us[name + ">" + peer] + floor_us[peer + ">" + name];
      EXPECT_GE(f.kmin, int64_t(floor_rtt * hz / 1e6)) << name << "->" << peer;
      EXPECT_LE(f.kmin, f.umin) << name << "->" << peer;
      fprintf(stderr, "  %s->%s: min RTT kernel %.2f us, user space %.2f us (floor %.0f us)\n", name.c_str(),
              peer.c_str(), f.kmin * 1e6 / hz, f.umin * 1e6 / hz, floor_rtt);
    }
  }
  // `info` shows both MinRTTs per peer.
  auto r = testutil::run(testutil::cptrace_bin() + " info --json " + (tmp / "n1"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* peer : {"n2", "n3"}) {
    const auto& s = j["sync"][peer]["start"];
    ASSERT_FALSE(s["kernel_min_us"].is_null()) << j.dump(2);
    EXPECT_LE(s["kernel_min_us"].get<double>(), s["user_min_us"].get<double>());
    EXPECT_EQ(s["rounds"].get<uint64_t>(), 100u);
  }
  r = testutil::run(testutil::cptrace_bin() + " info " + (tmp / "n1"), tmp);
  EXPECT_NE(r.out.find("kernel min us"), std::string::npos) << r.out;
}

namespace {

// Sends datagrams to ip:port from a socket inside namespace `ns`.
struct Sender {
  int fd;
  testbed::Addr to;
  Sender(const std::string& ns, const std::string& ip, uint16_t port) : to(testbed::make_addr(ip, port)) {
    fd = testbed::socket_in(ns, to.family(), SOCK_DGRAM);
  }
  ~Sender() { close(fd); }
  void send(const void* p, size_t n) { sendto(fd, p, n, 0, reinterpret_cast<sockaddr*>(&to.ss), to.len); }
};

minrtt::Message probe(uint64_t session, uint64_t seq) {
  minrtt::Message m;
  m.type = minrtt::MsgType::Probe;
  m.session = session;
  m.seq = seq;
  m.reply_port = 9;  // discard: the attacker does not care about answers
  m.node = "stranger";
  return m;
}

}  // namespace

TEST(Minrtt, HostileProbesAreCountedIgnoredAndGoodPeersStillServed) {
  REQUIRE_TESTBED();
  testbed::Testbed tb("mh", 3, "--delay 20");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  std::ofstream(tmp / "key") << "4f1c0a7e9b2d4c6e8a0b1c2d3e4f5a6b\n";
  std::ofstream(tmp / "wrong") << "00000000000000000000000000000000\n";
  chmod((tmp / "key").c_str(), 0600);
  chmod((tmp / "wrong").c_str(), 0600);
  std::vector<uint8_t> key = minrtt::load_key(tmp / "key"), wrong = minrtt::load_key(tmp / "wrong");
  testutil::Proc d(in_ns(tb.ns(1), testutil::cptrace_bin() + " minrttd --listen 10.77.1.2:7711 --node n1 --key " +
                                       (tmp / "key") + " --rate-limit 300 --stats-interval 0"),
                   tmp / "d.out", tmp / "d.err");
  ASSERT_TRUE(d.wait_for("listening on 10.77.1.2:7711", 10)) << testutil::read_file(d.err_path);

  Sender bad(tb.ns(3), "10.77.1.2", 7711);
  auto pace = [] { usleep(1000); };
  const uint64_t S = 0x5eed;
  // 30 malformed: garbage of the right size, short and long datagrams.
  for (int i = 0; i < 10; ++i) {
    std::vector<uint8_t> g(minrtt::kMessageBytes, uint8_t(i + 1));
    bad.send(g.data(), g.size()), pace();
    auto b = minrtt::encode(probe(S, 1000 + i), &key);
    bad.send(b.data(), 50), pace();
    std::vector<uint8_t> l(b.begin(), b.end());
    l.resize(200);
    bad.send(l.data(), l.size()), pace();
  }
  // 10 of another version, 10 with the wrong key, 10 without MAC, 5 replies (unexpected).
  for (int i = 0; i < 10; ++i) {
    auto b = minrtt::encode(probe(S, 2000 + i), &key);
    b[4] = minrtt::kProtocolVersion + 1;
    bad.send(b.data(), b.size()), pace();
    b = minrtt::encode(probe(S, 3000 + i), &wrong);
    bad.send(b.data(), b.size()), pace();
    b = minrtt::encode(probe(S, 4000 + i), nullptr);
    bad.send(b.data(), b.size()), pace();
  }
  for (int i = 0; i < 5; ++i) {
    auto m = probe(S, 5000 + i);
    m.type = minrtt::MsgType::Reply;
    m.reply_port = 0;
    auto b = minrtt::encode(m, &key);
    bad.send(b.data(), b.size()), pace();
  }
  // One genuine probe captured and replayed 4 times.
  auto genuine = minrtt::encode(probe(S, 6000), &key);
  for (int i = 0; i < 5; ++i) bad.send(genuine.data(), genuine.size()), pace();
  usleep(200000);

  // A good peer syncs while the stranger floods authenticated probes (rate limit).
  testutil::Proc good(in_ns(tb.ns(2), testutil::cptrace_bin() + " sync --node n2 --peers 10.77.1.2:7711 --key " +
                                          (tmp / "key") + " --sync-rounds 100 -o " + (tmp / "good")),
                      tmp / "g.out", tmp / "g.err");
  std::atomic<bool> flooding{true};
  std::thread flood([&] {
    Sender f(tb.ns(3), "10.77.1.2", 7711);
    for (uint64_t seq = 10000; flooding && seq < 10000 + 200000; ++seq) {
      auto b = minrtt::encode(probe(S + 1, seq), &key);
      f.send(b.data(), b.size());
      if (seq % 64 == 0) usleep(1000);
    }
  });
  int gst = good.wait(120);
  flooding = false;
  flood.join();
  // A peer with the wrong key gets nothing.
  auto w = testutil::run(in_ns(tb.ns(2), testutil::cptrace_bin() + " sync --node n2 --peers 10.77.1.2:7711 --key " +
                                             (tmp / "wrong") + " --sync-rounds 5 --sync-wait 1 -o " + (tmp / "w")),
                         tmp);
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait(10), 0);

  ASSERT_EQ(gst, 0) << testutil::read_file(good.err_path);
  NodeTrace g = load(tmp / "good");
  ASSERT_EQ(g.rounds.size(), 100u) << "the good peer got all its rounds during the flood";
  size_t kok = std::count_if(g.rounds.begin(), g.rounds.end(), [](auto& r) { return r.kernel_ok; });
  EXPECT_EQ(kok, 100u);
  EXPECT_NE(w.status, 0) << "a peer with the wrong key must not get rounds";
  EXPECT_NE(w.err.find("NO REPLY"), std::string::npos) << w.err;

  std::string out = testutil::read_file(d.out_path);
  auto pos = out.find("minrttd stats ");
  ASSERT_NE(pos, std::string::npos) << out;
  auto st = nlohmann::json::parse(out.substr(pos + 14, out.find('\n', pos) - pos - 14));
  fprintf(stderr, "  minrttd: %s\n", st.dump().c_str());
  EXPECT_EQ(st["malformed"].get<uint64_t>(), 30u);
  EXPECT_EQ(st["bad_version"].get<uint64_t>(), 10u);
  NodeTrace wt = load(tmp / "w");
  uint64_t wrong_tries = wt.meta["minrtt"]["peers"]["10.77.1.2:7711"]["attempted"].get<uint64_t>();
  EXPECT_GT(wrong_tries, 0u);
  EXPECT_EQ(st["bad_auth"].get<uint64_t>(), 20u + wrong_tries) << "wrong key + no MAC + the wrong-key peer's tries";
  EXPECT_EQ(st["unexpected"].get<uint64_t>(), 5u);
  EXPECT_EQ(st["replayed"].get<uint64_t>(), 4u);
  EXPECT_GT(st["rate_limited"].get<uint64_t>(), 0u);
  EXPECT_GE(st["answered"].get<uint64_t>(), 101u) << "the genuine probe once and the good peer's 100";
}

TEST(Minrtt, RecordRunsStartStreamAndStopRoundsWithARecordingPeer) {
  REQUIRE_TESTBED();
  REQUIRE_BPF();
  testbed::Testbed tb("mc", 2, "--delay 30");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  // The physical frequency over the recordings' own span (NTP may slew the monotonic
  // clock differently at other times), known to the two points' bracket widths.
  const ClockPoint before = sample_clock_point();
  const std::vector<std::string> sims = {"-800000000,-60", "2000000000,95"};
  std::string lib = (testutil::build_dir() / "libcptrace.so").string();
  const std::string key = make_key(tmp);
  std::vector<std::unique_ptr<testutil::Proc>> procs;
  // Both start together: each one's first probes may find the other not yet listening.
  for (int k = 1; k <= 2; ++k)
    procs.push_back(std::make_unique<testutil::Proc>(
        in_ns(tb.ns(k), testutil::record_cmd(tmp / ("n" + std::to_string(k))) + " --node n" + std::to_string(k) +
                            " --peers 10.77." + std::to_string(3 - k) + ".2:7711 --minrtt-listen 0.0.0.0:7711 --key " +
                            key + " --sync-rounds 50 --sync-rate 20 --simulate-clock " + sims[k - 1] + " --lib " + lib +
                            " -- sleep 3"),
        tmp / ("out" + std::to_string(k)), tmp / ("err" + std::to_string(k))));
  for (auto& p : procs) ASSERT_EQ(p->wait(120), 0) << testutil::read_file(p->err_path);
  const ClockPoint after = sample_clock_point();
  const double hz = ClockMap({before, after}).tsc_hz();
  const double hz_unc = double(before.width_ticks + after.width_ticks) / double(after.tsc - before.tsc);
  std::map<std::string, NodeTrace> all;
  for (int k = 1; k <= 2; ++k) {
    NodeTrace t = load(tmp / ("n" + std::to_string(k)));
    ASSERT_TRUE(t.sim.enabled);
    all[t.name] = t;
  }
  std::map<std::string, double> floor_us = {{"n1>n2", 30}, {"n2>n1", 30}};
  for (auto& [name, t] : all) {
    std::map<std::string, int> per_phase;
    for (auto& r : t.rounds) per_phase[r.phase]++;
    EXPECT_EQ(per_phase["start"], 50) << name;
    EXPECT_EQ(per_phase["stop"], 50) << name << ": MinRTT2 needs the peer's responder to still answer";
    EXPECT_GT(per_phase["stream"], 0) << name;
    auto figs = check_rounds(t, all, floor_us, hz);
    ASSERT_EQ(figs.size(), 1u);
    EXPECT_GE(figs.begin()->second.kernel_ok, t.rounds.size() * 9 / 10) << name;
    EXPECT_GE(t.meta["minrtt"]["responder"]["answered"].get<uint64_t>(), 100u) << name;
    // The correlation stream was written through the transform: its measured
    // frequency is the physical one times (1 + skew).
    TraceReader r(tmp / name);
    double sim_hz = r.clock_map().tsc_hz();
    double want = hz * (1 + double(t.sim.skew_ppb) * 1e-9);
    // Each measurement is as precise as its points' bracket widths over its span (a
    // least-squares slope through points off by at most w moves by at most 3w/span).
    const auto& pts = r.clock_map().points();
    ASSERT_GE(pts.size(), 2u);
    uint32_t w = 0;
    for (auto& p : pts) w = std::max(w, p.width_ticks);
    double sim_unc = 3.0 * w / double(pts.back().tsc - pts.front().tsc);
    EXPECT_NEAR(sim_hz / want, 1.0, hz_unc + sim_unc)
        << name << ": widths give +-" << (hz_unc + sim_unc) * 1e6 << " ppm";
    fprintf(stderr, "  %s: frequency %.3f ppm off the physical one times (1 + skew), +- %.3f ppm\n", name.c_str(),
            (sim_hz / want - 1) * 1e6, (hz_unc + sim_unc) * 1e6);
  }
}

// Voluntary context switches of a process's main thread (/proc/PID/task/PID/status).
long main_thread_switches(pid_t pid) {
  std::string st = testutil::read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/status");
  auto at = st.find("voluntary_ctxt_switches:");
  return at == std::string::npos ? -1 : std::stol(st.substr(at + 24));
}

// Idle, minrttd's main thread sleeps until a signal: over a second without
// --stats-interval or --duration it wakes at most for stray reasons (it polled
// every 100 ms before, 10 wakeups a second), and SIGTERM still ends it cleanly.
TEST(Minrtt, IdleResponderMainThreadSleepsUntilSignal) {
  testutil::TempDir tmp;
  testutil::Proc d(testutil::cptrace_bin() + " minrttd --insecure --listen 127.0.0.1:0 --stats-interval 0",
                   tmp / "d.out", tmp / "d.err");
  ASSERT_TRUE(d.wait_for("listening on", 10)) << testutil::read_file(d.err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  long before = main_thread_switches(d.pid);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  long after = main_thread_switches(d.pid);
  ASSERT_GE(before, 0);
  EXPECT_LE(after - before, 2) << "the main thread woke " << after - before << " times in 1 s";
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait(10), 0) << testutil::read_file(d.err_path);
  EXPECT_NE(testutil::read_file(d.out_path).find("minrttd stats "), std::string::npos);
}

TEST(Minrtt, BadFlagsAreRefusedNamingFlagAndValue) {
  testutil::TempDir tmp;
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"sync --peers 10.0.0.1:99999 -o " + (tmp / "t"), "--peers '10.0.0.1:99999'"},
      {"sync --peers 10.0.0.1:1,,10.0.0.2 -o " + (tmp / "t"), "empty entry"},
      {"minrttd --insecure --simulate-clock 5", "--simulate-clock 5"},
      {"minrttd --insecure --simulate-clock 1,5000", "SKEW_PPM"},
      {"minrttd --key " + (tmp / "nonexistent"), "--key"},
      {"minrttd --insecure --listen 192.0.2.1:7711", "cannot bind 192.0.2.1:7711"},
      {"minrttd --insecure --node " + std::string(40, 'n') + " --listen 127.0.0.1:0", "--node"},
      {"minrttd --insecure --allow 10.0.0.1,nonsense:x", "--allow"},
  };
  for (const auto& c : cases) {
    auto r = testutil::run(testutil::cptrace_bin() + " " + c.args, tmp);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\nstderr: " << r.err;
  }
}

// Every timestamp a node writes goes through its simulated transform: events of
// both paths (kernel mono stamps converted through the transformed correlation
// stream, and TSC-stamped batch events) fall, once undone, inside the undone span
// of the recording — a missed transform would put them 100 s away.
TEST(Minrtt, SimulatedClockCoversEventsOfBothPaths) {
  REQUIRE_BPF();
  for (const char* mode : {"single", "batch"}) {
    testutil::TempDir tmp;
    std::string workload = testutil::workload();
    auto r = testutil::run(testutil::record_cmd(tmp / "t") + " --simulate-clock 100000000000,-150 -- " + workload +
                               " --threads 2 --events 20000 --channels 2 --mode " + mode,
                           tmp);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("WARNING: SIMULATED CLOCK"), std::string::npos) << r.err;
    TraceReader tr(tmp / "t");
    ClockTransform sim = ClockTransform::from_json(tr.meta().at("simulated_clock"));
    ASSERT_TRUE(sim.enabled);
    EXPECT_EQ(sim.skew_ppb, -150000);
    uint64_t lo = sim.undo(tr.clock().front().tsc), hi = sim.undo(tr.clock().back().tsc);
    EXPECT_EQ(sim.undo(tr.meta()["start"]["tsc"].get<uint64_t>()), lo);
    uint64_t n = 0, outside = 0;
    tr.for_each_event([&](const TraceEvent& e) {
      uint64_t x = sim.undo(e.ts);
      n++;
      outside += x < lo || x > hi;
    });
    EXPECT_EQ(n, 40000u + 2u) << mode;  // events + one close per channel
    EXPECT_EQ(outside, 0u) << mode << ": events outside the recording once undone";
  }
}
