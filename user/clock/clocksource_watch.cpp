// The clocksource and its reading quanta over a recording (clocksource_watch.h).
#include "clock/clocksource_watch.h"

#include <algorithm>

#include "clock/clock_quantum.h"
#include "clock/ntp_state.h"

namespace cptrace {

ClocksourceWatch::ClocksourceWatch() : start_(current_clocksource()), now_(start_) { measure(); }

// The largest over the run: one value serves every bound of the trace.
void ClocksourceWatch::measure() {
  quantum_ns_ = std::max(quantum_ns_, measure_clock_quantum(CLOCK_MONOTONIC, now_));
  raw_quantum_ns_ = std::max(raw_quantum_ns_, measure_clock_quantum(CLOCK_MONOTONIC_RAW, now_));
}

void ClocksourceWatch::poll(uint64_t prev_mono_ns, uint64_t mono_ns) {
  std::string cs = current_clocksource();
  if (cs == now_) return;
  switches_.push_back({{"from_ns", prev_mono_ns}, {"to_ns", mono_ns}, {"from", now_}, {"to", cs}});
  now_ = cs;
  measure();
}

void ClocksourceWatch::describe(nlohmann::json& cd) const {
  cd["quantum_ns"] = quantum_ns_;
  cd["raw_quantum_ns"] = raw_quantum_ns_;
  cd["clocksource_at_start"] = start_;
  cd["clocksource_switches"] = switches_;
}

}  // namespace cptrace
