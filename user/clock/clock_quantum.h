// The step in which a clock reads: 1 ns for the clocksources that compute ns
// from a TSC (tsc, kvm-clock), ~70 ns for hpet, 100 ns for Hyper-V's TSC page,
// 279 ns for acpi_pm. A conversion bound that assumes 1 ns on a coarse clock
// misses by up to the step (seen in simulation: 32 / 60 / 72 / 262 ns for
// quanta of 42 / 70 / 100 / 279 ns), so the quantum enters every bound
// (ClockReading, clock_bounds.h; tsc_frequency.h).
#pragma once
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cptrace {

// From readings taken back to back. A clock coarser than one read shows the
// same value twice: its step is the smallest advance seen, plus 1 ns for steps
// that are not whole ns (hpet's 69.8). A clock that advanced at every read is at
// most that fine; for a clocksource known to read in ns (`ns_clocksource`) it
// is 1.
uint64_t quantum_from_reads(const std::vector<uint64_t>& reads, bool ns_clocksource);

// tsc and kvm-clock compute ns from a TSC, with sub-ns resolution.
bool ns_resolution_clocksource(const std::string& clocksource);

// Reads `clock` back to back (about 0.1 ms) and applies quantum_from_reads.
uint64_t measure_clock_quantum(clockid_t clock, const std::string& clocksource);

}  // namespace cptrace
