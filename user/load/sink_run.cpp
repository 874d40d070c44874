// `cptrace sink`: receives tuples, checks their ids, reports (sink.h for the
// data path and sink_control.h for the control rounds).
#include "load/sink_run.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

#include "load/sink.h"
#include "load/sink_control.h"
#include "os/stop_signals.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {

namespace {

// The final report; exit status 3 when a tuple was lost, duplicated or malformed.
int report_sink(const SinkOptions& o, SinkState& st) {
  std::lock_guard lk(st.mu);
  const IdLedger& L = st.ledger;
  bool rounds = st.rounds_done > 0;
  uint64_t bad = st.malformed.load();
  for (auto& r : st.round_log) bad += r.value("lost", 0ull) + r.value("duplicates", 0ull);
  if (!rounds) bad += L.missing() + L.duplicates();
  double span = ns_to_seconds(st.last_rx_ns - st.first_rx_ns);
  uint64_t rx_total = st.received.load();
  if (o.json) {
    nlohmann::json j = {{"received", rx_total},
                        {"malformed", st.malformed.load()},
                        {"rate", span > 0 ? (rx_total - 1) / span : 0.0},
                        {"rounds", st.round_log}};
    if (!rounds) j.update({{"unique", L.unique()}, {"duplicates", L.duplicates()}, {"missing", L.missing()}});
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("cptrace sink: {} tuples received, {} malformed, {:.1f} tuples/s (first to last receipt)\n", rx_total,
               st.malformed.load(), span > 0 ? (rx_total - 1) / span : 0.0);
    if (!rounds)
      fmt::print("  ids: {} unique, {} duplicates, {} missing between the lowest and highest id\n", L.unique(),
                 L.duplicates(), L.missing());
    for (auto& r : st.round_log)
      fmt::print(
          "  round {}: expected {} emitted {} unique {} duplicates {} lost {} outside {} "
          "intake {:.1f}/s drain {:.3f} s\n",
          r.value("round", 0u), r.value("expected", 0ull), r.value("emitted", 0ull), r.value("unique", 0ull),
          r.value("duplicates", 0ull), r.value("lost", 0ull), r.value("outside", 0ull), r.value("intake_rate", 0.0),
          r.value("drain_s", 0.0));
  }
  return bad ? 3 : 0;
}

}  // namespace

// The command around the receiver: signal handlers, the control server, the report.
int run_sink(const SinkOptions& o) {
  if (o.port == 0) throw std::runtime_error("--listen 0: give a port 1..65535");
  if (o.throttle < 0) throw std::runtime_error(fmt::format("--throttle {}: must be >= 0", o.throttle));
  SinkState st;
  st.ledger.reset_open();
  SinkReceiver rx(o, st);
  ControlServer ctl(o, st);
  StopSignals signals(&st.stop);
  std::thread timer;
  if (o.duration_s > 0)
    timer = std::thread([&] {
      for (int64_t i = 0; i < int64_t(o.duration_s * 100) && !st.stop; ++i) usleep(10000);
      st.stop = true;
    });
  say("listening on {} port {}, control port {}{}", o.udp ? "UDP" : "TCP", o.port, ctl.port(),
      o.throttle > 0 ? fmt::format(", throttled to {} tuples/s", o.throttle) : "");
  rx.run();
  if (timer.joinable()) timer.join();
  return report_sink(o, st);
}

}  // namespace cptrace
