#include "record/sync_trace.h"

#include <unistd.h>

#include <memory>

#include <fmt/core.h>

#include "record/clock_stream.h"
#include "sync/minrtt_protocol.h"
#include "sync/minrtt_record.h"
#include "sync/minrtt_responder.h"
#include "sync/sync_session.h"
#include "trace/block_codec.h"
#include "clock/clock_map.h"
#include "os/node_info.h"
#include "trace/trace_writer.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {
namespace {

SyncSessionOptions session_options(const SyncOptions& a, const std::string& node, const ClockTransform& sim,
                                   double tsc_hz) {
  SyncSessionOptions so;
  so.node = node;
  so.peers = parse_peers(a.peers);
  so.rounds = a.rounds;
  so.wait_s = a.wait_s;
  so.gap_ms = a.gap_ms;
  so.key = minrtt::key_or_insecure(a.key_file, a.insecure);
  so.sim = sim;
  so.tsc_hz = tsc_hz;
  return so;
}

// With --listen, so that peers running `sync` too can probe us; null without.
std::unique_ptr<Responder> start_responder(const SyncOptions& a, const SyncSessionOptions& so) {
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
  int64_t end = int64_t(sample_clock_point().mono_ns) + int64_t(seconds_to_ns(wait_s));
  while (int64_t(sample_clock_point().mono_ns) < end &&
         int64_t(sample_clock_point().mono_ns) - responder.stats().last_probe_ns.load() < kNsPerSecond)
    usleep(50000);
  responder.stop();
}

nlohmann::json start_meta(const std::string& node, const NodeInfo& ni, const ClockStream& clock) {
  return {{"format", "cptrace"},
          {"kind", "sync"},
          {"node", node},
          {"machine", ni.to_json()},
          {"start", clock.start_json()},
          {"simulated_clock", clock.sim().to_json()},
          {"complete", false}};
}

// meta.json "minrtt": per-peer counters, the rounds' summary, our responder's counters.
nlohmann::json minrtt_meta(const SyncOptions& a, const SyncSessionOptions& so, const SyncSession& session,
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

// Our rounds, then our responder's last answers to peers still at theirs.
std::vector<SyncRound> run_rounds(const SyncOptions& a, SyncSession& session, Responder* responder) {
  session.run_phase(a.phase);
  std::vector<SyncRound> rounds = session.take_rounds();
  if (responder) drain_responder(*responder, a.wait_s);
  return rounds;
}

void print_summary(const SyncOptions& a, const std::vector<SyncRound>& rounds) {
  size_t ok = 0;
  for (auto& r : rounds) ok += r.kernel_ok;
  say("{} rounds ({} with kernel stamps) -> {}", rounds.size(), ok, a.out_dir);
}

}  // namespace

int run_sync(const SyncOptions& a) {
  NodeInfo ni = read_node_info();
  std::string node = a.node.empty() ? ni.host : a.node;
  ClockStream clock(a.simulate_clock, ClockStream::Witness::Off);
  // A bad peer list, key or listen address fails here, before the trace directory exists.
  SyncSessionOptions so = session_options(a, node, clock.sim(), clock.tsc_hz());
  std::unique_ptr<Responder> responder = start_responder(a, so);
  nlohmann::json meta = start_meta(node, ni, clock);
  TraceWriter writer(a.out_dir, meta, a.overwrite);
  writer.write(*clock.take_points_frame());

  SyncSession session(so);
  std::vector<SyncRound> rounds = run_rounds(a, session, responder.get());
  clock.take_last_point();
  writer.write(*clock.take_points_frame());
  if (!rounds.empty()) writer.write(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
  double hz = clock.tsc_hz();
  meta["stop"] = clock.stop_json();
  meta["tsc_hz"] = hz;
  meta["minrtt"] = minrtt_meta(a, so, session, rounds, hz, responder.get());
  meta["complete"] = true;
  writer.finish(meta);
  print_summary(a, rounds);
  return rounds.empty() ? 1 : 0;
}

}  // namespace cptrace
