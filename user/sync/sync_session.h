// MinRTT phases of a recording (or of `cptrace sync`): N rounds with every peer at
// start (MinRTT1, phase "start"), an optional low-rate stream during the run
// ("stream"), N rounds at stop (MinRTT2, "stop"). Runs on its own thread, so a
// peer that is late or gone never holds up recording; rounds are handed to the
// caller (take_rounds) and written as Sync frames.
//
// Peers started at about the same time may not be listening yet: a peer that has
// not answered is retried until `wait_s` after the phase began, and the outcome is
// reported per peer on stderr (answering after X s / no reply: no MinRTT1).
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_transform.h"
#include "sync/minrtt_rounds.h"
#include "trace/sync_round.h"
#include "trace/sync_round_summary.h"  // summarize_rounds, for its callers

namespace cptrace {

struct SyncSessionOptions {
  std::string node;
  std::vector<Peer> peers;
  unsigned rounds = 100;  // per peer and phase
  double rate_hz = 0;  // stream rounds per second and peer; 0 = none
  double wait_s = 10;  // how long to retry a peer that does not answer
  double gap_ms = 1;  // pause between two rounds (keeps the path quiet)
  int timeout_ms = 200;  // per round
  std::vector<uint8_t> key;  // empty: no authentication
  ClockTransform sim;
  bool verbose = true;  // per-peer lines on stderr
  double tsc_hz = 0;  // for printing microseconds (0: ticks)
};

class SyncSession {
 public:
  explicit SyncSession(SyncSessionOptions opt);
  ~SyncSession();

  // Starts the thread: start phase, then the stream until stop_phase().
  void start();
  // Ends the stream, runs the stop phase, joins. Blocks at most about wait_s plus
  // the rounds' time.
  void stop_phase();
  // Runs one phase on the calling thread (`cptrace sync`).
  void run_phase(const std::string& phase);

  // Rounds not yet taken, in the order they completed.
  std::vector<SyncRound> take_rounds();
  nlohmann::json counters_json() const;

 private:
  void push(const SyncRound& r);
  void stream();

  SyncSessionOptions opt_;
  Initiator init_;
  uint64_t seq_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SyncRound> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cptrace
