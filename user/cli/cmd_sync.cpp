// `cptrace sync`: MinRTT rounds with peers, standalone, written as a trace
// directory (meta.json + events.cpt with Clock and Sync frames) that TraceReader,
// `info` and translation read like a recording's.
#include <time.h>
#include <unistd.h>

#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/commands.h"
#include "sync/minrtt_protocol.h"
#include "sync/minrtt_record.h"
#include "sync/minrtt_responder.h"
#include "sync/sync_session.h"
#include "trace/block_codec.h"
#include "trace/clock_map.h"
#include "trace/clock_now.h"
#include "trace/node_info.h"
#include "trace/trace_writer.h"

namespace cptrace {
namespace {

struct SyncArgs {
  std::string out_dir, peers, node, listen, key_file, simulate_clock, phase = "start";
  unsigned rounds = 100;
  double wait_s = 10, gap_ms = 1;
  bool overwrite = false, insecure = false;
};

SyncOptions session_options(const SyncArgs& a, const std::string& node, const ClockTransform& sim, double tsc_hz) {
  SyncOptions so;
  so.node = node;
  so.peers = parse_peers(a.peers);
  so.rounds = a.rounds;
  so.wait_s = a.wait_s;
  so.gap_ms = a.gap_ms;
  so.key = minrtt::key_or_insecure(a.key_file, a.insecure, "sync");
  so.sim = sim;
  so.tsc_hz = tsc_hz;
  return so;
}

// With --listen, so that peers running `sync` too can probe us; null without.
std::unique_ptr<Responder> start_responder(const SyncArgs& a, const SyncOptions& so) {
  if (a.listen.empty()) return nullptr;
  ResponderOptions ro;
  ro.listen = a.listen;
  ro.node = so.node;
  ro.key = so.key;
  for (const Peer& p : so.peers) ro.allow.push_back(p.addr);  // our peers need no cookie
  ro.sim = so.sim;
  auto responder = std::make_unique<Responder>(ro);
  responder->start();
  return responder;
}

// Keeps answering until peers have been quiet for 1 s (at most `wait_s`): peers
// that finish their rounds a little later still get their answers.
void drain_responder(Responder& responder, double wait_s) {
  int64_t end = int64_t(sample_clock_point().mono_ns) + int64_t(wait_s * 1e9);
  while (int64_t(sample_clock_point().mono_ns) < end &&
         int64_t(sample_clock_point().mono_ns) - responder.stats().last_probe_ns.load() < 1000000000ll)
    usleep(50000);
  responder.stop();
}

// rt_minus_mono: CLOCK_REALTIME - CLOCK_MONOTONIC read with `first`, so
// "start" is one instant on all three clocks.
nlohmann::json start_meta(const std::string& node, const NodeInfo& ni, const ClockPoint& first, int64_t rt_minus_mono,
                          const ClockTransform& sim) {
  return {{"format", "cptrace"},
          {"version", kFormatVersion},
          {"kind", "sync"},
          {"node", node},
          {"machine", ni.to_json()},
          {"start",
           {{"realtime_ns", uint64_t(int64_t(first.mono_ns) + rt_minus_mono)},
            {"mono_ns", first.mono_ns},
            {"tsc", first.tsc}}},
          {"simulated_clock", sim.to_json()},
          {"complete", false}};
}

// meta.json "minrtt": per-peer counters, the rounds' summary, our responder's counters.
nlohmann::json minrtt_meta(const SyncArgs& a, const SyncOptions& so, const SyncSession& session,
                           const std::vector<SyncRound>& rounds, double hz, const Responder* responder) {
  nlohmann::json m = {{"peers", session.counters_json()},
                      {"summary", summarize_rounds(rounds, hz)},
                      {"authenticated", !so.key.empty()},
                      {"protocol_version", minrtt::kProtocolVersion},
                      {"rounds_per_phase", a.rounds}};
  if (responder) {
    m["responder"] = responder->stats().to_json();
    m["listen"] = responder->local_address();
  }
  return m;
}

int run_sync(const SyncArgs& a) {
  NodeInfo ni = read_node_info();
  std::string node = a.node.empty() ? ni.host : a.node;
  ClockPoint p0 = sample_clock_point();
  int64_t start_rt_minus_mono = realtime_minus_mono_ns();
  usleep(20000);
  ClockPoint p1 = sample_clock_point();
  ClockTransform sim = make_simulated_clock(a.simulate_clock, ClockMap({p0, p1}).tsc_hz());
  auto simulated = [&](ClockPoint p) {
    p.tsc = sim.apply(p.tsc);
    if (p.has_raw()) p.raw_tsc = sim.apply(p.raw_tsc);  // every TSC this node writes
    return p;
  };
  std::vector<ClockPoint> clock{simulated(p0), simulated(p1)};
  // A bad peer list, key or listen address fails here, before the trace directory exists.
  SyncOptions so = session_options(a, node, sim, ClockMap(clock).tsc_hz());
  std::unique_ptr<Responder> responder = start_responder(a, so);
  nlohmann::json meta = start_meta(node, ni, clock[0], start_rt_minus_mono, sim);
  TraceWriter writer(a.out_dir, meta, a.overwrite);
  writer.write(encode_clock(clock));

  SyncSession session(so);
  session.run_phase(a.phase);
  std::vector<SyncRound> rounds = session.take_rounds();
  if (responder) drain_responder(*responder, a.wait_s);
  ClockPoint last = simulated(sample_clock_point());
  int64_t stop_rt_minus_mono = realtime_minus_mono_ns();
  writer.write(encode_clock({last}));
  clock.push_back(last);
  if (!rounds.empty()) writer.write(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
  double hz = ClockMap(clock).tsc_hz();
  meta["stop"] = {{"realtime_ns", uint64_t(int64_t(last.mono_ns) + stop_rt_minus_mono)},
                  {"mono_ns", last.mono_ns},
                  {"tsc", last.tsc}};
  meta["tsc_hz"] = hz;
  meta["minrtt"] = minrtt_meta(a, so, session, rounds, hz, responder.get());
  meta["complete"] = true;
  writer.finish(meta);
  size_t ok = 0;
  for (auto& r : rounds) ok += r.kernel_ok;
  fmt::print(stderr, "cptrace sync: {} rounds ({} with kernel stamps) -> {}\n", rounds.size(), ok, a.out_dir);
  return rounds.empty() ? 1 : 0;
}

}  // namespace

SubcommandRunner add_sync_command(CLI::App& app) {
  auto a = std::make_shared<SyncArgs>();
  auto* c = app.add_subcommand("sync", "MinRTT rounds with peers, written as a trace directory");
  c->add_option("--peers", a->peers, "HOST:PORT,... of MinRTT responders")->required();
  c->add_option("-o,--output", a->out_dir, "trace directory to create")->required();
  c->add_option("--node", a->node, "this node's name (default: host name)");
  c->add_option("--sync-rounds", a->rounds, "rounds per peer")->check(CLI::Range(1, 1000000));
  c->add_option("--sync-wait", a->wait_s, "seconds to keep retrying a peer that does not answer yet")
      ->check(CLI::Range(0.0, 3600.0));
  c->add_option("--gap-ms", a->gap_ms, "pause between rounds, ms")->check(CLI::Range(0.0, 10000.0));
  c->add_option("--phase", a->phase, "phase written into the rounds")
      ->check(CLI::IsMember({"start", "stop", "stream"}));
  c->add_option("--listen", a->listen, "also answer probes on ADDR:PORT while syncing");
  c->add_option("--key", a->key_file, "HMAC key file (cptrace keygen); required unless --insecure");
  c->add_flag("--insecure", a->insecure, "no key: unauthenticated rounds, recorded as such in meta.json (trials only)");
  c->add_option("--simulate-clock", a->simulate_clock,
                "TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM] applied to every timestamp written");
  c->add_flag("-f,--force", a->overwrite, "overwrite an existing trace in the directory");
  return {c, [a] { return run_sync(*a); }};
}

}  // namespace cptrace
