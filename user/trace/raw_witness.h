// The second witness of the clock: CLOCK_MONOTONIC_RAW against the TSC.
//
// Why. The syscall watch (clock_change_candidates.h) sees every change an NTP
// client makes, but a clock can also move against the TSC with no syscall at
// all: a hypervisor re-anchoring kvm-clock (migration, KVM_SET_CLOCK), the
// clocksource watchdog switching tsc -> hpet, a TSC whose rate changes (a live
// migration to a host without TSC scaling). CLOCK_MONOTONIC_RAW is never
// disciplined: it is the clocksource's counter times a fixed mult, so while the
// clocksource follows the TSC it is affine in the TSC, to within each point's
// RAW bracket and reading quantum. Every one of those faults moves MONOTONIC and
// RAW alike (both are computed from the same clocksource read), so RAW leaving
// its line between two points shows a fault in that segment.
//
// How. The rate is the least-squares slope of the RAW brackets over the whole
// stream (ClockMap::tsc_hz: ppb-tight over seconds, and a step in the middle
// moves it by ~step/span, far below one segment's tolerance). Each point's
// offset against that rate, raw_tsc - rate * raw_ns, must agree with the next
// point's to within both brackets, both quanta and the rate's uncertainty over
// the segment. A segment where it does not departs: it and its two neighbours
// (whose rate tests read it) fall back to the assumption-free bound, counted
// (ClockModelStats::departed).
#pragma once
#include <cstdint>
#include <vector>

#include "trace/clock_bounds.h"
#include "trace/trace_format.h"

namespace cptrace {

struct RawWitness {
  uint64_t checked = 0;  // segments with RAW at both ends
  uint64_t departed = 0;  // of them, off the line
  long double largest_ns = 0;  // the largest departure beyond tolerance
  std::vector<ClockChange> spans;  // CLOCK_MONOTONIC spans of the departed segments
};

// `pts` as ClockMap keeps them (sorted, strictly increasing). Points without
// RAW (version-1 traces) check nothing.
RawWitness raw_witness(const std::vector<ClockPoint>& pts, uint64_t raw_quantum_ns = 1);

}  // namespace cptrace
