// Ground truth for the kernel-matrix guest's coarse-clocksource check
// (tests/kernels/guest-init.sh, check `clock-<clocksource>`). Two modes:
//
//   clock_truth run TRUTH --events N [--udp PEER_NETNS ADDR PORT]
//     The recorded program. A sampler thread reads (lfence; rdtsc) /
//     clock_gettime(CLOCK_MONOTONIC) / (lfence; rdtsc; lfence) about every millisecond
//     (tests/truth_sampler.h, as on the host). The main thread logs N events with
//     cp_logTS, each call bracketed by TSC reads, and with --udp sends one
//     datagram per event from this namespace to ADDR:PORT, received by a socket
//     this process opened in PEER_NETNS: the packet's transmit lies inside the
//     sendto() call, its receive between that call's start and the recvfrom()'s
//     end. Every bracket goes to TRUTH (text, one line each).
//
//   clock_truth check TRACE TRUTH --clocksource NAME [--port PORT]
//     Reads the trace with the same reader `cptrace` uses and checks, N of N: each
//     truth sample's CLOCK_MONOTONIC reading converted through the trace's clock
//     model (mono_to_tsc_bounds) meets the sample's TSC bracket; each packet's
//     converted stamp (the reader's ts +- ts_err) meets its bracket; each cp_logTS
//     stamp lies inside its call; and meta.json shows NAME as the clocksource and
//     a reading quantum above 1 ns. Prints one line, PASS or FAIL with details,
//     and exits 0 or 1.
//
// Kept out of `cptrace` on purpose: the truth comes from the program itself, not
// from anything the recorder measured.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cptrace.h"
#include "cptrace_net.h"
#include "clock/clock_change_candidates.h"
#include "trace/trace_reader.h"
#include "truth_sampler.h"

namespace {

const char* kChannel = "clock.truth";

uint64_t tsc_before() {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
uint64_t tsc_after() { return tsc_before(); }  // lfence-bracketed, as rdtscp + lfence

[[noreturn]] void die(const std::string& why) {
  fmt::print(stderr, "clock_truth: {}: {}\n", why, strerror(errno));
  exit(2);
}

// A UDP pair: `tx` here, connected to ADDR:PORT; `rx` bound to it inside the
// network namespace at PEER_NETNS (this thread enters it and comes back).
struct UdpPair {
  int tx = -1, rx = -1;
  UdpPair(const std::string& peer_netns, const std::string& addr, int port) {
    int home = open("/proc/self/ns/net", O_RDONLY), peer = open(peer_netns.c_str(), O_RDONLY);
    if (home < 0 || peer < 0) die("open netns");
    if (setns(peer, CLONE_NEWNET) != 0) die("setns peer");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    rx = socket(AF_INET, SOCK_DGRAM, 0);
    if (rx < 0 || bind(rx, (sockaddr*)&a, sizeof a) != 0) die("bind in peer");
    if (setns(home, CLONE_NEWNET) != 0) die("setns home");
    close(home);
    close(peer);
    tx = socket(AF_INET, SOCK_DGRAM, 0);
    if (tx < 0 || connect(tx, (sockaddr*)&a, sizeof a) != 0) die("connect");
    // Datagrams back from the peer socket, before the recording's own. The first
    // resolves the neighbours both ways (the request teaches this end the peer's
    // address), so that every datagram afterwards leaves inside its send() call,
    // which the truth assumes; it may itself wait for the reply and leave from
    // softirq. The second then transmits in process context, so the recorder learns
    // that this process owns the peer's end of the flow and keeps the receives
    // there (docs/net.md, ownership of packets; kernels before 6.3 have no socket
    // events to learn it from).
    sockaddr_in me{};
    socklen_t len = sizeof me;
    getsockname(tx, (sockaddr*)&me, &len);
    for (int i = 0; i < 2; i++) {
      char b[16] = "hello";
      if (sendto(rx, b, sizeof b, 0, (sockaddr*)&me, sizeof me) != sizeof b) die("sendto back");
      if (recv(tx, b, sizeof b, 0) != sizeof b) die("recv back");
    }
  }
};

int run(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string truth_path = argv[2];
  int events = 0;
  std::string peer, addr;
  int port = 0;
  for (int i = 3; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--events" && i + 1 < argc) {
      events = atoi(argv[++i]);
    } else if (a == "--udp" && i + 3 < argc) {
      peer = argv[++i];
      addr = argv[++i];
      port = atoi(argv[++i]);
    } else {
      fmt::print(stderr, "clock_truth run: unknown argument {}\n", a);
      return 2;
    }
  }
  std::unique_ptr<UdpPair> udp;
  if (!peer.empty()) udp = std::make_unique<UdpPair>(peer, addr, port);
  uint64_t ch = cp_open_channel(kChannel);
  std::ostringstream out;
  truth::MonoSampler sampler(1000);
  for (int i = 0; i < events; i++) {
    uint64_t b = tsc_before();
    cp_logTS(ch, uint64_t(i));
    uint64_t a = tsc_after();
    out << fmt::format("event {} {} {}\n", i, b, a);
    if (udp) {
      char msg[32] = {};
      snprintf(msg, sizeof msg, "dgram %d", i);
      b = tsc_before();
      ssize_t s = send(udp->tx, msg, sizeof msg, 0);
      uint64_t sent = tsc_after();
      ssize_t r = recv(udp->rx, msg, sizeof msg, 0);
      a = tsc_after();
      if (s != sizeof msg || r != sizeof msg) die("datagram");
      out << fmt::format("udp {} {} {} {}\n", i, b, sent, a);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  sampler.stop();
  for (const truth::MonoSample& s : sampler.samples())
    out << fmt::format("sample {} {} {}\n", s.mono_ns, s.tsc_lo, s.tsc_hi);
  std::ofstream(truth_path) << out.str();
  fmt::print("clock_truth run: {} events, {} datagrams, {} samples\n", events, udp ? events : 0,
             sampler.samples().size());
  return 0;
}

// ---- check -------------------------------------------------------------------

struct Truth {
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> events;  // tuple -> call bracket
  struct Udp {
    uint64_t before, sent, after;
  };
  std::vector<Udp> udp;  // in send order
  std::vector<truth::MonoSample> samples;
};

Truth read_truth(const std::string& path) {
  Truth t;
  std::ifstream in(path);
  std::string kind;
  while (in >> kind) {
    uint64_t i, a, b, c;
    if (kind == "event" && in >> i >> a >> b) {
      t.events[i] = {a, b};
    } else if (kind == "udp" && in >> i >> a >> b >> c) {
      t.udp.push_back({a, b, c});
    } else if (kind == "sample" && in >> i >> a >> b) {
      t.samples.push_back({i, a, b});
    } else {
      break;
    }
  }
  return t;
}

// How many bounds met their truth, and the bounds' widths in ns.
struct Tally {
  size_t n = 0, met = 0;
  std::vector<double> width_ns;
  double worst_miss_ns = 0;
  void add(long double lo, long double hi, uint64_t t_lo, uint64_t t_hi, double ns_per_tick) {
    n++;
    long double miss = std::max(lo - (long double)t_hi, (long double)t_lo - hi);
    if (miss <= 0)
      met++;
    else
      worst_miss_ns = std::max(worst_miss_ns, double(miss) * ns_per_tick);
    width_ns.push_back(double(hi - lo) * ns_per_tick);
  }
  std::string text(const std::string& what) {
    std::sort(width_ns.begin(), width_ns.end());
    std::string s = fmt::format("{} {}/{}", what, met, n);
    if (!width_ns.empty())
      s += fmt::format(" width median {:.0f} max {:.0f} ns", width_ns[width_ns.size() / 2], width_ns.back());
    if (met != n) s += fmt::format(" worst miss {:.0f} ns", worst_miss_ns);
    return s;
  }
};

int check(int argc, char** argv) {
  if (argc < 4) return 2;
  std::string trace = argv[2], truth_path = argv[3], clocksource;
  int port = -1;
  for (int i = 4; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--clocksource") clocksource = argv[i + 1];
    if (a == "--port") port = atoi(argv[i + 1]);
  }
  std::vector<std::string> fails;
  cptrace::TraceReader r(trace);
  if (r.error()) {
    fmt::print("FAIL trace unreadable: {}\n", r.error()->what());
    return 1;
  }
  Truth t = read_truth(truth_path);
  const cptrace::ClockMap& map = r.clock_map();
  if (map.points().size() < 2) {
    fmt::print("FAIL {} correlation points\n", map.points().size());
    return 1;
  }
  const double ns_per_tick = 1e9 / map.tsc_hz();

  // The clocksource the recording ran on, and the step the recorder measured.
  const nlohmann::json cd = r.meta().value("clock_discipline", nlohmann::json::object());
  std::string at_start = cd.value("clocksource_at_start", std::string());
  uint64_t quantum = cd.value("quantum_ns", uint64_t(0)), raw_quantum = cd.value("raw_quantum_ns", uint64_t(0));
  size_t switches = cd.value("clocksource_switches", nlohmann::json::array()).size();
  if (at_start != clocksource) fails.push_back(fmt::format("clocksource_at_start '{}'", at_start));
  if (switches != 0) fails.push_back(fmt::format("{} clocksource switches", switches));
  if (quantum <= 1) fails.push_back(fmt::format("quantum_ns {}", quantum));

  // The model at the truth samples inside the correlation stream.
  // A sample the model bounded (not its segment's fallback, which spans the whole
  // segment: tens of ms here) gets a bound far narrower than the segment.
  Tally conv;
  size_t by_model = 0;
  const auto& pts = map.points();
  uint64_t first = pts.front().mono_ns, last = pts.back().mono_ns;
  for (const truth::MonoSample& s : t.samples) {
    if (s.mono_ns < first || s.mono_ns > last) continue;
    cptrace::TscBounds b = map.mono_to_tsc_bounds(s.mono_ns);
    conv.add(b.lo, b.hi, s.tsc_lo, s.tsc_hi, ns_per_tick);
    auto next = std::upper_bound(pts.begin(), pts.end(), s.mono_ns,
                                 [](uint64_t m, const cptrace::ClockPoint& p) { return m < p.mono_ns; });
    if (next == pts.end()) next = std::prev(pts.end());
    by_model += (b.hi - b.lo) * 10 < next->tsc - std::prev(next)->tsc;
  }
  // The same model told the clock reads in ns: how many samples its bounds would
  // miss. A figure, not a check: it shows whether the quantum matters on this
  // clocksource, which is what makes the check above sharp.
  size_t miss_1ns = 0;
  {
    cptrace::ClockMap fine(r.clock(), cptrace::clock_change_candidates(r.clock_history()), cptrace::ClockReading{1, 1});
    for (const truth::MonoSample& s : t.samples) {
      if (s.mono_ns < first || s.mono_ns > last) continue;
      cptrace::TscBounds b = fine.mono_to_tsc_bounds(s.mono_ns);
      miss_1ns += b.lo > s.tsc_hi || b.hi < s.tsc_lo;
    }
  }
  if (conv.n < 100) fails.push_back(fmt::format("only {} truth samples inside the recording", conv.n));
  if (conv.met != conv.n) fails.push_back(fmt::format("conversion {}/{}", conv.met, conv.n));
  // Containment alone would pass if every segment fell back. The one accepted
  // reason for that is the clock moving against the TSC with no call in the guest
  // (RAW departs): under TCG, the host's CLOCK_MONOTONIC being adjusted.
  const cptrace::ClockModelStats& st = map.model_stats();
  if (by_model == 0 && st.departed == 0) fails.push_back("no sample bounded by the model, none departed");

  // cp_logTS stamps: TSC read inside the call, no conversion.
  size_t inside = 0, user = 0, unknown = 0;
  const uint64_t ch = cp_channel_id(kChannel);
  r.for_each_event([&](const cptrace::TraceEvent& e) {
    if (e.kind != uint8_t(cptrace::EventKind::User) || e.channel != ch) return;
    user++;
    auto it = t.events.find(e.tuple);
    if (it == t.events.end())
      unknown++;
    else
      inside += e.ts >= it->second.first && e.ts <= it->second.second;
  });
  if (user != t.events.size() || unknown)
    fails.push_back(fmt::format("cp_logTS {} recorded of {}", user, t.events.size()));
  if (inside != t.events.size())
    fails.push_back(fmt::format("cp_logTS {}/{} inside their call", inside, t.events.size()));

  // Packets of the flow to PORT, in the order sent (one at a time, each received
  // before the next is sent): transmits within sendto(), receives between its start
  // and recvfrom()'s end.
  Tally tx, rx;
  if (port >= 0) {
    std::vector<cptrace::NetEvent> got[2];
    r.for_each_net_event([&](const cptrace::NetEvent& e) {
      if (e.r.proto != IPPROTO_UDP || e.r.dport != port || e.r.len == 0) return;
      if (e.r.kind == CP_NET_PKT_TX) got[0].push_back(e);
      if (e.r.kind == CP_NET_PKT_RX) got[1].push_back(e);
    });
    for (int k = 0; k < 2; k++) {
      auto& v = got[k];
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.r.ktime_ns < b.r.ktime_ns; });
      if (v.size() != t.udp.size()) {
        fails.push_back(fmt::format("{} {} packets of {} datagrams", v.size(), k ? "rx" : "tx", t.udp.size()));
        continue;
      }
      for (size_t i = 0; i < v.size(); i++) {
        const auto& u = t.udp[i];
        (k ? rx : tx)
            .add((long double)v[i].ts - v[i].ts_err, (long double)v[i].ts + v[i].ts_err, u.before, k ? u.after : u.sent,
                 ns_per_tick);
      }
    }
    if (tx.met != tx.n) fails.push_back(fmt::format("tx {}/{}", tx.met, tx.n));
    if (rx.met != rx.n) fails.push_back(fmt::format("rx {}/{}", rx.met, rx.n));
  }

  std::string details = fmt::format(
      "{}, quantum {} ns (raw {}), {} points, {} ({} by the model; taken as 1 ns: {} missed); {}; {}; cp_logTS {}/{} "
      "in their call; segments {} (fallback: "
      "violated {} crowded {} departed {}), tsc {:.0f} MHz",
      at_start, quantum, raw_quantum, map.points().size(), conv.text("conversion"), by_model, miss_1ns, tx.text("tx"),
      rx.text("rx"), inside, t.events.size(), st.segments, st.violated, st.crowded, st.departed, map.tsc_hz() / 1e6);
  std::string why;
  for (const std::string& f : fails) why += (why.empty() ? "" : "; ") + f;
  if (fails.empty())
    fmt::print("PASS {}\n", details);
  else
    fmt::print("FAIL {} | {}\n", why, details);
  return fails.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run") return run(argc, argv);
  if (mode == "check") return check(argc, argv);
  fmt::print(stderr,
             "usage: clock_truth run TRUTH --events N [--udp PEER_NETNS ADDR PORT]\n"
             "       clock_truth check TRACE TRUTH --clocksource NAME [--port PORT]\n");
  return 2;
}
