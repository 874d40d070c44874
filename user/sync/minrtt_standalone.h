// `cptrace minrttd`: the standalone MinRTT responder, one per node.
#pragma once
#include <string>

namespace cptrace {

struct MinrttdOptions {
  std::string listen, node, key_file, simulate_clock, allow;
  bool insecure = false;
  double per_source_hz = 5000, duration_s = 0, stats_s = 10;
};

// Answers probes until SIGINT/SIGTERM or the end of --duration, printing the
// counters every --stats-interval and at exit; 0.
int run_minrttd(const MinrttdOptions& a);

}  // namespace cptrace
