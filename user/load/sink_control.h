// The sink's control channel: one JSON object per line over TCP (default port:
// data port + 1), so a generator or `maxrate` can run measured rounds.
//
//   -> {"op":"begin","first_id":F,"count":N,"rate":R,"duration":D}
//   <- {"ok":true}                  the sink now expects ids F..F+N-1, nothing else
//   -> {"op":"end","emitted":E}     the generator is done and handed E tuples to its kernel
//   <- {"ok":true, ...RoundResult}  after the sink drained (all E arrived, or no tuple
//                                   for drain_idle, or drain_max elapsed)
//   -> {"op":"stats"}   <- totals so far
//
// While a round runs, the sink samples its count of unique ids every 10 ms; the
// intake rate is the least-squares slope of those samples over the second half
// of the round (begin..end message), so a backlog that keeps growing shows as
// an intake below the emission rate.
#pragma once
#include <cstdint>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "load/net_endpoint.h"
#include "load/sink.h"

namespace cptrace {

struct RoundResult {
  uint64_t expected = 0, emitted = 0, unique = 0, duplicates = 0, missing = 0, outside = 0;
  uint64_t lost = 0;  // emitted - unique: handed to the network, never arrived
  uint64_t lag_tuples = 0;  // emitted - unique when the end message arrived
  double intake_rate = 0;  // tuples/s over the second half of the round
  double drain_s = 0;  // end message to the last expected tuple (or give-up)
  uint64_t first_missing = UINT64_MAX;
  static RoundResult from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// Server side, a thread of the `sink` command.
class ControlServer {
 public:
  ControlServer(const SinkOptions& o, SinkState& st);
  ~ControlServer();
  uint16_t port() const { return port_; }

 private:
  void loop();
  void serve(int fd);
  nlohmann::json handle(const nlohmann::json& req);
  nlohmann::json end_round(uint64_t emitted);
  void sample();

  const SinkOptions& o_;
  SinkState& st_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread th_;
  // current round (control thread only)
  int64_t begin_ns_ = 0;
  double rate_ = 0;
  std::vector<std::pair<int64_t, uint64_t>> samples_;
};

// Client side (gen --control, maxrate).
class SinkControl {
 public:
  explicit SinkControl(const Endpoint& e);
  ~SinkControl();
  void begin(uint64_t first_id, uint64_t count, double rate, double duration_s);
  RoundResult end(uint64_t emitted);

 private:
  nlohmann::json call(const nlohmann::json& req);
  Endpoint ep_;
  int fd_ = -1;
};

// Least-squares slope of y over x (x in ns, result per second); 0 with < 2 points.
double slope_per_s(const std::vector<std::pair<int64_t, uint64_t>>& pts);

}  // namespace cptrace
