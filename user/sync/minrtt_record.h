// MinRTT inside `cptrace record`: the embedded responder (so recording peers can
// probe this node), the start/stream/stop rounds with --peers, and the test-only
// simulated clock. The recorder calls start() once its writer exists, takes the
// finished rounds at every flush (Sync frames), and calls stop() when recording
// ends.
#pragma once
#include <sys/types.h>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_transform.h"
#include "trace/sync_round.h"

namespace CLI {
class App;
}

namespace cptrace {

class Responder;
class SyncSession;

struct MinrttRecordOptions {
  std::string peers;  // --peers HOST:PORT,...
  std::string listen;  // --minrtt-listen ADDR:PORT (default [::]:7711 when --peers)
  unsigned rounds = 100;  // --sync-rounds, per peer and phase
  double rate_hz = 0;  // --sync-rate, stream rounds per second and peer
  double wait_s = 10;  // --sync-wait, retry deadline for peers not yet answering
  double linger_s = 0;  // --sync-linger, the responder's least time after the stop phase
  std::string hold_file;  // --sync-hold FILE: answer after the stop phase while FILE exists
  std::string key_file;  // --key
  bool insecure = false;  // --insecure: no key, rounds recorded as unauthenticated
  std::string simulate_clock;  // --simulate-clock OFFSET_NS,SKEW_PPM (test only)
  bool active() const { return !peers.empty() || !listen.empty(); }
};

// Adds the options above to `record`.
void add_minrtt_record_options(CLI::App* record, MinrttRecordOptions& o);
// With --peers or --minrtt-listen, exactly one of --key (a valid key file) and
// --insecure (warned about on stderr here) is required: throws otherwise. Called
// before anything is created or started.
void check_minrtt_auth(const MinrttRecordOptions& o);

// Parses --simulate-clock (identity when empty) and prints the loud warning.
ClockTransform make_simulated_clock(const std::string& spec, double tsc_hz);

class MinrttRecording {
 public:
  // Binds the responder (throws on a bad address or key): do this before
  // anything irreversible happens.
  MinrttRecording(const MinrttRecordOptions& opt, const std::string& node, const ClockTransform& sim, double tsc_hz);
  ~MinrttRecording();
  void start();
  std::vector<SyncRound> take_rounds();
  // Stop phase, then keeps answering for --sync-linger and until peers have been
  // quiet for 1 s (at most the larger of --sync-wait and --sync-linger): peers
  // that stop a little later still get their MinRTT2. With --sync-hold FILE it
  // writes "stopped" into FILE after the stop phase and also keeps answering
  // while FILE exists and the process that started the recorder lives: peers
  // that stop any time later still get theirs (`cluster record`'s agent removes
  // FILE once every node has stopped).
  void stop();
  // meta.json "minrtt": responder counters, per-peer round counters, summary.
  nlohmann::json meta(double tsc_hz, const std::vector<SyncRound>& all_rounds) const;

 private:
  MinrttRecordOptions opt_;
  ClockTransform sim_;
  pid_t parent_;  // who started the recorder: a hold ends when it is gone
  std::vector<uint8_t> key_;
  std::unique_ptr<Responder> responder_;
  std::unique_ptr<SyncSession> session_;
};

}  // namespace cptrace
