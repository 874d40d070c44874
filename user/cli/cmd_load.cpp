#include "cli/cmd_load.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include <fmt/core.h>

#include "load/generator.h"
#include "load/maxrate.h"
#include "load/overhead.h"
#include "load/sink.h"
#include "load/sink_control.h"

namespace cptrace {

namespace {

std::atomic<bool> g_gen_stop{false};
void on_gen_stop(int) { g_gen_stop = true; }

struct GenCmd {
  std::string to, control;
  GenOptions g;
  bool json = false;
};

void print_gen_report(const GenOptions& g, const GenReport& r, const RoundResult* s) {
  fprintf(stderr,
          "cptrace gen: %llu of %llu tuples emitted (%llu refused) in %.3f s: %.1f tuples/s achieved for %.1f "
          "requested (%+.3f%%)\n"
          "  slot lateness: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us; blocked by the transport %.3f s\n",
          (unsigned long long)r.emitted, (unsigned long long)r.scheduled, (unsigned long long)r.send_errors,
          r.elapsed_s, r.achieved_rate, g.rate, 100 * (r.achieved_rate / g.rate - 1),
          r.lateness.quantile(0.5) / 1e3, r.lateness.quantile(0.99) / 1e3, r.lateness.quantile(0.999) / 1e3,
          r.lateness.max() / 1e3, r.blocked_s);
  if (!r.error.empty()) fprintf(stderr, "  error: %s\n", r.error.c_str());
  if (s)
    fprintf(stderr, "  sink: %llu unique of %llu emitted, %llu lost, %llu duplicates, intake %.1f/s, drain %.3f s\n",
            (unsigned long long)s->unique, (unsigned long long)s->emitted, (unsigned long long)s->lost,
            (unsigned long long)s->duplicates, s->intake_rate, s->drain_s);
}

int run_gen_cmd(GenCmd& c) {
  c.g.to = parse_endpoint(c.to, "--to");
  validate(c.g);
  std::unique_ptr<SinkControl> ctl;
  uint64_t n = slot_count(c.g.rate, c.g.duration_s);
  if (!c.control.empty()) {
    ctl = std::make_unique<SinkControl>(parse_endpoint(c.control, "--control"));
    ctl->begin(c.g.first_id, n, c.g.rate, c.g.duration_s);
  }
  struct sigaction sa {};
  sa.sa_handler = on_gen_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  GenReport r = run_generator(c.g, &g_gen_stop);
  std::optional<RoundResult> s;
  if (ctl) s = ctl->end(r.emitted);
  if (c.json) {
    auto j = r.to_json();
    j["rate"] = c.g.rate;
    if (s) j["sink"] = s->to_json();
    printf("%s\n", j.dump(2).c_str());
  }
  print_gen_report(c.g, r, s ? &*s : nullptr);
  if (!r.error.empty()) return 1;
  if (s && (s->lost || s->duplicates)) return 3;
  return r.emitted == r.scheduled ? 0 : 2;
}

std::atomic<SinkState*> g_sink_state{nullptr};
void on_sink_stop(int) {
  if (SinkState* s = g_sink_state.load()) s->stop = true;
}

}  // namespace

int run_sink(const SinkOptions& o) {
  if (o.port == 0) throw std::runtime_error("--listen 0: give a port 1..65535");
  if (o.throttle < 0) throw std::runtime_error(fmt::format("--throttle {}: must be >= 0", o.throttle));
  SinkState st;
  st.ledger.reset_open();
  SinkReceiver rx(o, st);
  ControlServer ctl(o, st);
  g_sink_state = &st;
  struct sigaction sa {};
  sa.sa_handler = on_sink_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread timer;
  if (o.duration_s > 0)
    timer = std::thread([&] {
      for (int64_t i = 0; i < int64_t(o.duration_s * 100) && !st.stop; ++i) usleep(10000);
      st.stop = true;
    });
  fprintf(stderr, "cptrace sink: listening on %s port %u, control port %u%s\n", o.udp ? "UDP" : "TCP", o.port,
          ctl.port(), o.throttle > 0 ? fmt::format(", throttled to {} tuples/s", o.throttle).c_str() : "");
  rx.run();
  if (timer.joinable()) timer.join();
  g_sink_state = nullptr;

  std::lock_guard lk(st.mu);
  const IdLedger& L = st.ledger;
  bool rounds = st.rounds_done > 0;
  uint64_t bad = st.malformed.load();
  for (auto& r : st.round_log) bad += r.value("lost", 0ull) + r.value("duplicates", 0ull);
  if (!rounds) bad += L.missing() + L.duplicates();
  double span = (st.last_rx_ns - st.first_rx_ns) / 1e9;
  uint64_t rx_total = st.received.load();
  if (o.json) {
    nlohmann::json j = {{"received", rx_total}, {"malformed", st.malformed.load()},
                        {"rate", span > 0 ? (rx_total - 1) / span : 0.0}, {"rounds", st.round_log}};
    if (!rounds) j.update({{"unique", L.unique()}, {"duplicates", L.duplicates()}, {"missing", L.missing()}});
    printf("%s\n", j.dump(2).c_str());
  } else {
    printf("cptrace sink: %llu tuples received, %llu malformed, %.1f tuples/s (first to last receipt)\n",
           (unsigned long long)rx_total, (unsigned long long)st.malformed.load(),
           span > 0 ? (rx_total - 1) / span : 0.0);
    if (!rounds)
      printf("  ids: %llu unique, %llu duplicates, %llu missing between the lowest and highest id\n",
             (unsigned long long)L.unique(), (unsigned long long)L.duplicates(), (unsigned long long)L.missing());
    for (auto& r : st.round_log)
      printf("  round %u: expected %llu emitted %llu unique %llu duplicates %llu lost %llu outside %llu "
             "intake %.1f/s drain %.3f s\n",
             r.value("round", 0u), r.value("expected", 0ull), r.value("emitted", 0ull), r.value("unique", 0ull),
             r.value("duplicates", 0ull), r.value("lost", 0ull), r.value("outside", 0ull),
             r.value("intake_rate", 0.0), r.value("drain_s", 0.0));
  }
  return bad ? 3 : 0;
}

std::function<std::optional<int>()> add_load_commands(CLI::App& app) {
  auto gc = std::make_shared<GenCmd>();
  auto* gen = app.add_subcommand("gen", "emit tuples at an exact constant rate (TCP or UDP)");
  gen->add_option("--to", gc->to, "HOST:PORT of the receiver")->required();
  gen->add_option("--rate", gc->g.rate, "tuples per second (all threads together)")->required();
  gen->add_option("--duration", gc->g.duration_s, "seconds of slots")->required();
  gen->add_option("--size", gc->g.size, "bytes per tuple, 16-byte header included (default 64)");
  gen->add_option("--threads", gc->g.threads, "emitting threads, one socket each (default 1)");
  gen->add_flag("--udp", gc->g.udp, "one UDP datagram per tuple (default TCP)");
  gen->add_option("--batch", gc->g.batch, "when behind schedule, send up to N due tuples in one write (default 1)");
  gen->add_option("--channel", gc->g.channel, "cp_logTS channel of the emissions (default gen.emit)");
  gen->add_option("--first-id", gc->g.first_id, "id of the first tuple (default 0)");
  gen->add_option("--control", gc->control, "HOST:PORT of a sink's control port: run one checked round");
  gen->add_flag("--json", gc->json, "report as JSON on stdout");

  auto so = std::make_shared<SinkOptions>();
  auto* sink = app.add_subcommand("sink", "receive tuples, check ids for gaps and duplicates, report");
  sink->add_option("--listen", so->port, "data port (TCP, or UDP with --udp)")->required();
  sink->add_option("--bind", so->bind, "address to listen on (default: all)");
  sink->add_flag("--udp", so->udp, "receive UDP datagrams");
  sink->add_option("--throttle", so->throttle, "consume at most this many tuples/s (a slow consumer)");
  sink->add_option("--control-port", so->control_port, "control port (default: data port + 1)");
  sink->add_option("--rounds", so->rounds, "exit after this many control rounds");
  sink->add_option("--duration", so->duration_s, "exit after this many seconds");
  sink->add_option("--channel", so->channel, "cp_logTS channel of the receipts (default sink.recv)");
  sink->add_option("--drain-idle", so->drain_idle_s, "end of round: stop waiting after this long without a tuple");
  sink->add_flag("--json", so->json, "final report as JSON on stdout");

  auto mo = std::make_shared<MaxrateOptions>();
  auto mto = std::make_shared<std::string>();
  auto* mr = app.add_subcommand("maxrate", "find the maximum sustainable throughput against a sink");
  mr->add_option("--to", *mto, "HOST:PORT of the data receiver")->required();
  mr->add_option("--control", mo->control, "HOST:PORT of the sink's control port (default: --to port + 1)");
  mr->add_option("--from", mo->from, "first rate, tuples/s")->required();
  mr->add_option("--step", mo->step, "rate increment per round")->required();
  mr->add_option("--duration", mo->duration_s, "seconds per round")->required();
  mr->add_option("--max", mo->max, "highest rate to try");
  mr->add_option("--tolerance", mo->tolerance, "relative shortfall allowed (default 0.02)");
  mr->add_option("--size", mo->gen.size, "bytes per tuple (default 64)");
  mr->add_option("--threads", mo->gen.threads, "generator threads (default 1)");
  mr->add_option("--batch", mo->gen.batch, "catch-up batch (default 1)");
  mr->add_flag("--udp", mo->gen.udp, "UDP instead of TCP");
  mr->add_flag("--json", mo->json, "rounds and result as JSON");

  auto oo = std::make_shared<OverheadOptions>();
  auto* ov = app.add_subcommand("overhead", "CPU a command really takes, by displacement of a calibrated busy loop");
  ov->add_option("--cpus", oo->cpus, "CPUs to measure, the command is pinned to them (default: all allowed)");
  ov->add_option("--calibrate", oo->calibrate_s, "seconds of spinner calibration (default 1)");
  ov->add_option("--baseline", oo->baseline_s, "seconds of background measurement before and after (default 0.5)");
  ov->add_option("--nice", oo->nice, "niceness of the command (default 0)")->check(CLI::Range(-20, 19));
  ov->add_flag("--json", oo->json, "report as JSON on stdout");
  ov->add_option("cmd", oo->cmd, "command to measure (after --)");

  return [=]() -> std::optional<int> {
    if (*gen) return run_gen_cmd(*gc);
    if (*sink) return run_sink(*so);
    if (*mr) {
      mo->gen.to = parse_endpoint(*mto, "--to");
      return run_maxrate(*mo);
    }
    if (*ov) return run_overhead(*oo);
    return std::nullopt;
  };
}

}  // namespace cptrace
