// The TSC frequency that turns ticks into seconds, as a strict interval from two
// correlation points.
//
// Which second. CLOCK_MONOTONIC is what NTP bends: frequency corrections up to
// +-500 ppm, tick changes up to +-10 %, offset slews at up to chrony's
// maxslewrate (83 333 ppm), all of which put their average over any span into a
// frequency measured against it (seen: +628 ppm under +-500 ppm and +-2 % tick
// toggles, +150 ppm under a chronyd steering to a drifting reference; durations
// of 10-25 ms then missed their truth by 1.5-12 us). CLOCK_MONOTONIC_RAW is never
// adjusted: its second is the clocksource's calibrated nominal second, the same
// at every instant of the run. Durations in ns are in that second. It differs
// from SI by the oscillator's error, which NTP estimates (adjtimex `freq`) but
// cannot bound; traces without RAW fall back to MONOTONIC and say so.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "clock/clock_point.h"

namespace cptrace {

struct TscFrequency {
  double hz = 0, lo = 0, hi = 0;  // estimate and strict interval, ticks per second
  bool raw = false;  // against CLOCK_MONOTONIC_RAW (else CLOCK_MONOTONIC)
  const char* clock() const { return raw ? "CLOCK_MONOTONIC_RAW" : "CLOCK_MONOTONIC"; }
};

// From p1 to p2 (p2 later): against RAW when both points carry it, else against
// MONOTONIC. Each bracket's width and one reading quantum per point (the clock
// reads in steps of `quantum_ns`, 1 for a nanosecond clocksource) make the
// interval strict. nullopt when the points do not advance both clocks.
std::optional<TscFrequency> tsc_frequency(const ClockPoint& p1, const ClockPoint& p2, uint64_t quantum_ns = 1);

// Over points [i, j] of a stream (ClockMap's points, i < j) whose TSC changed
// its rate in the segments `rate_changes` (raw_witness.h): with no change in
// between, the two points' interval. Across a change no one frequency is
// right: a duration there runs partly at each side's rate, so its average
// frequency lies between them, and the interval is widened to hold every
// frequency the stretch's pieces were measured at (each piece from its own
// first to last point, wherever those lie; `rate_changes` sorted). A piece of
// one point (two changes in neighbouring segments, or one in an end segment)
// has no rate: nullopt.
std::optional<TscFrequency> tsc_frequency(const std::vector<ClockPoint>& pts, size_t i, size_t j,
                                          const std::vector<size_t>& rate_changes, uint64_t quantum_ns = 1);

}  // namespace cptrace
