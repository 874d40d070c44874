// MinRTT phases: see sync_session.h.
#include "sync/sync_session.h"
#include "os/say.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include <fmt/core.h>

namespace cptrace {
namespace {

using Clock = std::chrono::steady_clock;

double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One peer's progress in a phase.
struct PeerPhase {
  unsigned done = 0, attempts = 0;
  bool answered = false;
  int64_t kmin = INT64_MAX, umin = INT64_MAX;
};

// One line per peer on stderr: its rounds and minimum RTTs, or that it never answered.
void print_phase_outcome(const SyncSessionOptions& opt, const std::string& phase, const std::vector<PeerPhase>& st) {
  double hz = opt.tsc_hz;
  for (size_t i = 0; i < opt.peers.size(); ++i) {
    const PeerPhase& s = st[i];
    if (!s.answered) {
      say("MinRTT {}: NO REPLY from {} within {:.1f} s: no rounds with it in this phase", phase, opt.peers[i].text,
          opt.wait_s);
    } else {
      std::string k = s.kmin == INT64_MAX ? "none" : fmt::format("{} ticks", s.kmin);
      std::string u = s.umin == INT64_MAX ? "none" : fmt::format("{} ticks", s.umin);
      if (hz > 0 && s.kmin != INT64_MAX) k = fmt::format("{:.2f} us", s.kmin * 1e6 / hz);
      if (hz > 0 && s.umin != INT64_MAX) u = fmt::format("{:.2f} us", s.umin * 1e6 / hz);
      say("MinRTT {} with {}: {}/{} rounds, min RTT kernel {}, user space {}", phase, opt.peers[i].text, s.done,
          opt.rounds, k, u);
    }
  }
}

}  // namespace

SyncSession::SyncSession(SyncSessionOptions opt)
    : opt_(std::move(opt)), init_(opt_.node, opt_.key.empty() ? nullptr : &opt_.key, &opt_.sim, opt_.timeout_ms) {}

SyncSession::~SyncSession() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SyncSession::push(const SyncRound& r) {
  std::lock_guard lk(mu_);
  pending_.push_back(r);
}

std::vector<SyncRound> SyncSession::take_rounds() {
  std::lock_guard lk(mu_);
  std::vector<SyncRound> v;
  v.swap(pending_);
  return v;
}

nlohmann::json SyncSession::counters_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [peer, c] : init_.all_counters()) j[peer] = c.to_json();
  return j;
}

void SyncSession::run_phase(const std::string& phase) {
  auto t0 = Clock::now();
  std::vector<PeerPhase> st(opt_.peers.size());
  const unsigned max_attempts = opt_.rounds * 3 + 10;  // after the first answer
  for (;;) {
    bool any = false;
    for (size_t i = 0; i < opt_.peers.size(); ++i) {
      PeerPhase& s = st[i];
      if (s.done >= opt_.rounds || (s.answered && s.attempts >= max_attempts)) continue;
      if (!s.answered && secs_since(t0) > opt_.wait_s) continue;
      any = true;
      auto r = init_.round(opt_.peers[i], phase, ++seq_);
      if (s.answered) s.attempts++;
      if (!r) {
        if (!s.answered) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!s.answered && opt_.verbose && secs_since(t0) > 0.5)
        say("MinRTT peer {} ({}) answering after {:.1f} s", opt_.peers[i].text, r->peer, secs_since(t0));
      s.answered = true;
      s.done++;
      if (r->kernel_ok) s.kmin = std::min(s.kmin, r->kernel_rtt());
      if (r->user_ok) s.umin = std::min(s.umin, r->user_rtt());
      push(*r);
      if (opt_.gap_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(int64_t(opt_.gap_ms * 1000)));
    }
    if (!any) break;
  }
  if (opt_.verbose) print_phase_outcome(opt_, phase, st);
}

void SyncSession::stream() {
  if (!(opt_.rate_hz > 0)) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stopping_; });
    return;
  }
  auto period = std::chrono::duration<double>(1.0 / opt_.rate_hz);
  auto next = Clock::now();
  for (;;) {
    next += std::chrono::duration_cast<Clock::duration>(period);
    {
      std::unique_lock lk(mu_);
      if (cv_.wait_until(lk, next, [&] { return stopping_; })) return;
    }
    for (const Peer& p : opt_.peers) {
      auto r = init_.round(p, "stream", ++seq_);
      if (r) push(*r);
    }
  }
}

void SyncSession::start() {
  thread_ = std::thread([this] {
    run_phase("start");
    stream();
  });
}

void SyncSession::stop_phase() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  run_phase("stop");
}

}  // namespace cptrace
