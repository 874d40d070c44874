// `cptrace minrttd`: the standalone MinRTT responder, one per node.
#include "sync/minrtt_standalone.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include <fmt/core.h>

#include "sync/minrtt_protocol.h"
#include "sync/minrtt_record.h"
#include "sync/minrtt_responder.h"
#include "sync/minrtt_rounds.h"
#include "clock/clock_map.h"
#include "os/node_info.h"
#include "os/stop_signals.h"

namespace cptrace {

namespace {

// TSC frequency from two correlation points `ms` apart (for the simulated clock's
// ns -> ticks conversion).
double quick_tsc_hz(int ms = 20) {
  ClockPoint a = sample_clock_point();
  usleep(ms * 1000);
  ClockPoint b = sample_clock_point();
  ClockMap m({a, b});
  return m.tsc_hz();
}

// Sleeps until SIGINT/SIGTERM, the end of --duration, or the next stats line
// (printed on the way): no periodic wakeup when neither timer is set.
void wait_for_stop(const StopSignals& signals, const MinrttdOptions& a, const Responder& r) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto end = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(a.duration_s));
  const auto every = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(a.stats_s));
  auto next_stats = t0 + every;
  for (;;) {
    auto now = clock::now();
    if (a.duration_s > 0 && now >= end) return;
    if (a.stats_s > 0 && now >= next_stats) {
      fmt::print("minrttd: {}\n", r.stats().line());
      fflush(stdout);
      next_stats += every;
      continue;
    }
    clock::time_point wake = clock::time_point::max();
    if (a.duration_s > 0) wake = end;
    if (a.stats_s > 0) wake = std::min(wake, next_stats);
    int timeout_ms = -1;
    if (wake != clock::time_point::max())  // rounded up: no early wakeup to loop on
      timeout_ms = int(std::chrono::ceil<std::chrono::milliseconds>(wake - now).count());
    int sig = signals.wait(timeout_ms);
    if (sig > 0) return;  // 0: timed out, or poll was interrupted by another signal
  }
}

}  // namespace

int run_minrttd(const MinrttdOptions& a) {
  ResponderOptions ro;
  ro.listen = a.listen;
  ro.node = a.node.empty() ? read_node_info().host : a.node;
  ro.key = minrtt::key_or_insecure(a.key_file, a.insecure);
  if (!a.allow.empty())
    for (const Peer& p : parse_peers(a.allow, "--allow")) ro.allow.push_back(p.addr);
  ro.sim = make_simulated_clock(a.simulate_clock, a.simulate_clock.empty() ? 0 : quick_tsc_hz());
  ro.per_source_hz = a.per_source_hz;
  ro.per_source_burst = std::max(10.0, a.per_source_hz / 10);
  StopSignals signals;
  Responder r(ro);
  if (ro.sim.enabled) fmt::print("simulated_clock {}\n", ro.sim.to_json().dump());
  fmt::print("minrttd: node {} listening on {} (protocol {}{})\n", ro.node, r.local_address(), minrtt::kProtocolVersion,
             ro.key.empty() ? ", no authentication" : ", HMAC-SHA256");
  fflush(stdout);
  r.start();
  wait_for_stop(signals, a, r);
  r.stop();
  fmt::print("minrttd: {}\n", r.stats().line());
  fmt::print("minrttd stats {}\n", r.stats().to_json().dump());
  fflush(stdout);
  return 0;
}

}  // namespace cptrace
