// `cptrace sync`: MinRTT rounds with peers, standalone, written as a trace
// directory (meta.json + events.cpt with Clock and Sync frames) that TraceReader,
// `info` and translation read like a recording's.
#pragma once
#include <string>

namespace cptrace {

struct SyncOptions {
  std::string out_dir;
  std::string peers;  // HOST:PORT,... of MinRTT responders
  std::string node;  // this node's name (default: host name)
  std::string listen;  // also answer probes on ADDR:PORT while syncing (empty: no)
  std::string key_file;  // HMAC key (cptrace keygen); empty only with insecure
  std::string simulate_clock;  // TEST ONLY: OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM]
  std::string phase = "start";  // written into the rounds
  unsigned rounds = 100;  // per peer
  double wait_s = 10;  // how long to retry a peer that does not answer yet
  double gap_ms = 1;  // pause between rounds
  bool overwrite = false;
  bool insecure = false;
};

// Returns the exit status: 0, or 1 when no round completed.
int run_sync(const SyncOptions& opt);

}  // namespace cptrace
