// Which clocksource the kernel reads, and in what step, over a recording.
//
// The reading quantum is measured at start (clock_quantum.h) and again whenever
// the clocksource changes: the clocksource watchdog switches tsc -> hpet with no
// syscall, and the new one may read far coarser. The recorder polls
// current_clocksource at every correlation point (a sysfs read, microseconds
// every 100 ms); a switch between two points is kept as the span between them,
// which the reader treats as a fault of the clock (clock_bounds.h: that segment
// and its neighbours fall back). meta.json's clock_discipline gets the largest
// quanta seen and the switches.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

class ClocksourceWatch {
 public:
  ClocksourceWatch();  // reads the clocksource and measures both quanta now
  // At a correlation point taken at CLOCK_MONOTONIC `mono_ns`; `prev_mono_ns`:
  // the point before it.
  void poll(uint64_t prev_mono_ns, uint64_t mono_ns);
  // Into meta.json's clock_discipline: quantum_ns, raw_quantum_ns,
  // clocksource_at_start, clocksource_switches [{from_ns, to_ns, from, to}].
  void describe(nlohmann::json& cd) const;
  uint64_t quantum_ns() const { return quantum_ns_; }

 private:
  void measure();
  std::string start_, now_;
  uint64_t quantum_ns_ = 1, raw_quantum_ns_ = 1;
  nlohmann::json switches_ = nlohmann::json::array();
};

}  // namespace cptrace
