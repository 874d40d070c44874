// A clock's reading step, measured (clock_quantum.h).
#include "clock/clock_quantum.h"

#include <algorithm>
#include <limits>

#include "clock/clock_now.h"

namespace cptrace {

uint64_t quantum_from_reads(const std::vector<uint64_t>& reads, bool ns_clocksource) {
  uint64_t smallest = std::numeric_limits<uint64_t>::max();
  bool repeated = false;
  for (size_t i = 1; i < reads.size(); ++i) {
    if (reads[i] == reads[i - 1]) repeated = true;
    if (reads[i] > reads[i - 1]) smallest = std::min(smallest, reads[i] - reads[i - 1]);
  }
  if (smallest == std::numeric_limits<uint64_t>::max()) return 1;  // never advanced: nothing to go on
  if (repeated) return smallest + 1;
  return ns_clocksource ? 1 : smallest;
}

bool ns_resolution_clocksource(const std::string& cs) { return cs == "tsc" || cs == "kvm-clock"; }

uint64_t measure_clock_quantum(clockid_t clock, const std::string& clocksource) {
  std::vector<uint64_t> reads(4096);
  for (uint64_t& r : reads) r = uint64_t(clock_now_ns(clock));
  return quantum_from_reads(reads, ns_resolution_clocksource(clocksource));
}

}  // namespace cptrace
