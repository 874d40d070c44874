// The throughput-controlled load generator: tuple k (k = 0, 1, ...) leaves at
// start + k/R exactly, whatever happened to tuple k-1 (slots are computed from k,
// never accumulated, so nothing drifts), by busy-waiting until its slot. Payloads
// are serialized once; each emission patches the 64-bit tuple id and calls the
// cp_logTS probe site on the emission channel just before the send.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "load/lateness_hist.h"
#include "load/net_endpoint.h"

namespace cptrace {

struct GenOptions {
  Endpoint to;
  double rate = 0;  // tuples/s over all threads
  double duration_s = 0;  // slots in [start, start + duration)
  uint32_t size = 64;  // bytes per tuple, header included
  unsigned threads = 1;  // thread t emits tuples t, t+N, t+2N, ... on its own socket
  bool udp = false;
  unsigned batch = 1;  // most tuples one write carries when their slots are already due
  std::string channel = "gen.emit";
  uint64_t first_id = 0;  // ids first_id .. first_id + count - 1
};

struct GenReport {
  uint64_t scheduled = 0;  // slots in the run
  uint64_t emitted = 0;  // tuples fully handed to the kernel
  uint64_t send_errors = 0;  // tuples the kernel refused (UDP: ECONNREFUSED, ENOBUFS)
  double elapsed_s = 0;  // slot 0 to the last emission
  double achieved_rate = 0;  // (emitted - 1) / elapsed_s: exactly the rate when every tuple is on time
  double blocked_s = 0;  // summed over threads: time waiting for the socket to take data
  bool stopped_early = false;
  std::string error;  // a thread's transport failed (connection reset, ...)
  LatenessHist lateness;  // per tuple: emission instant - its slot
  nlohmann::json to_json() const;
};

// Number of slots of a run: ceil(rate * duration).
uint64_t slot_count(double rate, double duration_s);
void validate(const GenOptions& o);  // throws naming the bad flag and value
// Connects, emits, closes. `stop` (may be null) ends the run early.
GenReport run_generator(const GenOptions& o, const std::atomic<bool>* stop);

}  // namespace cptrace
