// `cptrace minrttd`: the standalone MinRTT responder, one per node.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/commands.h"
#include "sync/minrtt_protocol.h"
#include "sync/minrtt_record.h"
#include "sync/minrtt_responder.h"
#include "sync/minrtt_rounds.h"
#include "trace/clock_map.h"
#include "trace/node_info.h"

namespace cptrace {
namespace {

std::atomic<int> g_stop{0};
void on_signal(int s) { g_stop = s; }

struct MinrttdArgs {
  std::string listen, node, key_file, simulate_clock, allow;
  bool insecure = false;
  double per_source_hz = 5000, duration_s = 0, stats_s = 10;
};

// TSC frequency from two correlation points `ms` apart (for the simulated clock's
// ns -> ticks conversion).
double quick_tsc_hz(int ms = 20) {
  ClockPoint a = sample_clock_point();
  usleep(ms * 1000);
  ClockPoint b = sample_clock_point();
  ClockMap m({a, b});
  return m.tsc_hz();
}

int run_minrttd(const MinrttdArgs& a) {
  ResponderOptions ro;
  ro.listen = a.listen;
  ro.node = a.node.empty() ? read_node_info().host : a.node;
  ro.key = minrtt::key_or_insecure(a.key_file, a.insecure, "minrttd");
  if (!a.allow.empty())
    for (const Peer& p : parse_peers(a.allow, "--allow")) ro.allow.push_back(p.addr);
  ro.sim = make_simulated_clock(a.simulate_clock, a.simulate_clock.empty() ? 0 : quick_tsc_hz());
  ro.per_source_hz = a.per_source_hz;
  ro.per_source_burst = std::max(10.0, a.per_source_hz / 10);
  Responder r(ro);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (ro.sim.enabled) printf("simulated_clock %s\n", ro.sim.to_json().dump().c_str());
  printf("minrttd: node %s listening on %s (protocol %u%s)\n", ro.node.c_str(), r.local_address().c_str(),
         minrtt::kProtocolVersion, ro.key.empty() ? ", no authentication" : ", HMAC-SHA256");
  fflush(stdout);
  r.start();
  auto t0 = std::chrono::steady_clock::now(), last = t0;
  while (!g_stop) {
    usleep(100000);
    auto now = std::chrono::steady_clock::now();
    if (a.duration_s > 0 && std::chrono::duration<double>(now - t0).count() >= a.duration_s) break;
    if (a.stats_s > 0 && std::chrono::duration<double>(now - last).count() >= a.stats_s) {
      printf("minrttd: %s\n", r.stats().line().c_str());
      fflush(stdout);
      last = now;
    }
  }
  r.stop();
  printf("minrttd: %s\n", r.stats().line().c_str());
  printf("minrttd stats %s\n", r.stats().to_json().dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace

SubcommandRunner add_minrttd_command(CLI::App& app) {
  auto a = std::make_shared<MinrttdArgs>();
  auto* c = app.add_subcommand("minrttd", "MinRTT responder: answers clock-probe rounds with kernel timestamps");
  c->add_option("--listen", a->listen, "ADDR:PORT to bind (default [::]:7711, IPv4 too; [V6]:PORT for IPv6)");
  c->add_option("--node", a->node, "node name sent to peers (default: host name)");
  c->add_option("--key", a->key_file, "HMAC key file (cptrace keygen): answer only authenticated probes; required unless --insecure");
  c->add_flag("--insecure", a->insecure, "no key: answer unauthenticated probes (trials only)");
  c->add_option("--allow", a->allow, "ADDR,... answered without the cookie check (other sources first get a cookie)");
  c->add_option("--simulate-clock", a->simulate_clock, "TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM] applied to the stamps sent");
  c->add_option("--rate-limit", a->per_source_hz, "probes per second answered per source address")->check(CLI::Range(1.0, 1e6));
  c->add_option("--duration", a->duration_s, "exit after SEC seconds (default: until SIGINT/SIGTERM)")->check(CLI::NonNegativeNumber);
  c->add_option("--stats-interval", a->stats_s, "print the counters every SEC seconds (0: only at exit)")->check(CLI::NonNegativeNumber);
  return {c, [a] { return run_minrttd(*a); }};
}

}  // namespace cptrace
