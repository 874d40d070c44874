// MinRTT inside `cptrace record`: see minrtt_record.h.
#include "sync/minrtt_record.h"

#include <time.h>
#include <algorithm>
#include <cmath>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "sync/minrtt_protocol.h"
#include "sync/minrtt_responder.h"
#include "sync/sync_session.h"
#include "clock/clock_now.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {

void add_minrtt_record_options(CLI::App* record, MinrttRecordOptions& o) {
  record->add_option("--peers", o.peers, "MinRTT peers HOST:PORT,... (rounds at start, stop, and --sync-rate)");
  record->add_option("--minrtt-listen", o.listen,
                     "address of the embedded MinRTT responder (default [::]:7711 with --peers)");
  record->add_option("--sync-rounds", o.rounds, "MinRTT rounds per peer at start and at stop")
      ->check(CLI::Range(1, 100000));
  record->add_option("--sync-rate", o.rate_hz, "MinRTT stream rounds per second and peer while recording (0: none)")
      ->check(CLI::Range(0.0, 1000.0));
  record->add_option("--sync-wait", o.wait_s, "seconds to keep retrying a peer that does not answer yet")
      ->check(CLI::Range(0.0, 3600.0));
  record
      ->add_option("--sync-linger", o.linger_s,
                   "seconds the responder keeps answering after this node's stop phase, even when quiet "
                   "(peers stopping later still get their MinRTT2; `cluster record` sets it)")
      ->check(CLI::Range(0.0, 3600.0));
  record
      ->add_option("--sync-hold", o.hold_file,
                   "after the stop phase, write \"stopped\" into this existing FILE and keep answering while it "
                   "exists and the parent process lives (`cluster record` sets it)")
      ->check(CLI::ExistingFile);
  record->add_option("--key", o.key_file, "HMAC key file (cptrace keygen): authenticate MinRTT probes and replies");
  record->add_flag("--insecure", o.insecure,
                   "MinRTT without a key: unauthenticated rounds, recorded as such (trials only)");
  record->add_option("--simulate-clock", o.simulate_clock,
                     "TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM] applied to every timestamp written");
}

void check_minrtt_auth(const MinrttRecordOptions& o) {
  if (o.active()) minrtt::key_or_insecure(o.key_file, o.insecure);
}

ClockTransform make_simulated_clock(const std::string& spec, double tsc_hz) {
  if (spec.empty()) return {};
  // Rounded to the MHz, so every process of the node (record, minrttd, sync) turns
  // OFFSET_NS into the same offset_ticks although each measures the frequency.
  ClockTransform t = ClockTransform::parse(spec, std::round(tsc_hz / 1e6) * 1e6);
  say_line(t.warning());
  return t;
}

MinrttRecording::MinrttRecording(const MinrttRecordOptions& opt, const std::string& node, const ClockTransform& sim,
                                 double tsc_hz)
    : opt_(opt), sim_(sim), parent_(getppid()) {
  key_ = minrtt::key_or_insecure(opt_.key_file, opt_.insecure, false);
  std::vector<Peer> peers = opt_.peers.empty() ? std::vector<Peer>{} : parse_peers(opt_.peers);
  ResponderOptions ro;
  ro.listen = opt_.listen;
  for (const Peer& p : peers) ro.allow.push_back(p.addr);  // our peers need no cookie
  ro.node = node;
  ro.key = key_;
  ro.sim = sim_;
  responder_ = std::make_unique<Responder>(ro);
  if (!opt_.peers.empty()) {
    SyncSessionOptions so;
    so.node = node;
    so.peers = peers;
    so.rounds = opt_.rounds;
    so.rate_hz = opt_.rate_hz;
    so.wait_s = opt_.wait_s;
    so.key = key_;
    so.sim = sim_;
    so.tsc_hz = tsc_hz;
    session_ = std::make_unique<SyncSession>(so);
  }
}

MinrttRecording::~MinrttRecording() = default;

void MinrttRecording::start() {
  responder_->start();
  say("MinRTT responder on {}{}", responder_->local_address(), key_.empty() ? "" : " (HMAC)");
  if (session_) session_->start();
}

std::vector<SyncRound> MinrttRecording::take_rounds() {
  return session_ ? session_->take_rounds() : std::vector<SyncRound>{};
}

namespace {

// Says "stopped" in the hold file, then waits while it exists and our parent
// (the agent that created it, `parent` when we started) lives: once the agent
// is gone nobody would remove it.
void hold(const std::string& file, pid_t parent) {
  int fd = open(file.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;  // already released
  bool said = write(fd, "stopped\n", 8) == 8;
  close(fd);
  if (!said) return;
  struct stat st;
  while (stat(file.c_str(), &st) == 0 && getppid() == parent) usleep(50000);
}

}  // namespace

void MinrttRecording::stop() {
  if (session_) session_->stop_phase();
  // At least --sync-linger, then until peers have been quiet for 1 s, at most
  // the larger of the two limits; a hold counts towards both.
  const int64_t now = mono_ns(), linger_end = now + int64_t(seconds_to_ns(opt_.linger_s));
  const int64_t end = now + int64_t(seconds_to_ns(std::max(opt_.wait_s, opt_.linger_s)));
  if (!opt_.hold_file.empty()) hold(opt_.hold_file, parent_);
  auto quiet = [&] { return mono_ns() - responder_->stats().last_probe_ns.load() >= kNsPerSecond; };
  while (mono_ns() < end && (mono_ns() < linger_end || !quiet())) usleep(50000);
  responder_->stop();
  say("MinRTT responder: {}", responder_->stats().line());
}

nlohmann::json MinrttRecording::meta(double tsc_hz, const std::vector<SyncRound>& all) const {
  nlohmann::json j = {{"responder", responder_->stats().to_json()},
                      {"listen", responder_->local_address()},
                      {"authenticated", !key_.empty()},
                      {"protocol_version", minrtt::kProtocolVersion},
                      {"rounds_per_phase", opt_.rounds},
                      {"stream_rate_hz", opt_.rate_hz}};
  if (session_) {
    j["peers"] = session_->counters_json();
    j["summary"] = summarize_rounds(all, tsc_hz);
  }
  return j;
}

}  // namespace cptrace
