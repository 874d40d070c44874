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
//
// A TSC whose rate changes at one instant (a live migration to a host without
// TSC scaling) leaves RAW on one line before and another after: against one
// fit over the run every segment departs. So where two or more segments depart,
// the stream is split where two lines fit it best (least total squared
// residual) and each side is fitted and checked on its own; the split stands
// when the two sides together depart in fewer segments than the one line did,
// counting the segment between them, which holds the change and departs. Each
// side may split again. A step is one departure wherever the line is cut, so
// steps never split a line.
#pragma once
#include <cstdint>
#include <vector>

#include "clock/clock_bounds.h"
#include "clock/clock_point.h"

namespace cptrace {

struct RawWitness {
  uint64_t checked = 0;  // segments with RAW at both ends
  uint64_t departed = 0;  // of them, off the line
  long double largest_ns = 0;  // the largest departure beyond tolerance
  std::vector<ClockChange> spans;  // CLOCK_MONOTONIC spans of the departed segments
  // Where the TSC's rate changed: segment i (points i and i + 1) holds the
  // change; it is among the departed. Sorted.
  std::vector<size_t> rate_changes;
  // The lines between the changes: points [first, last], each one rate.
  struct Piece {
    size_t first = 0, last = 0;
    double hz = 0;  // its TSC ticks per CLOCK_MONOTONIC_RAW second
  };
  std::vector<Piece> pieces;
};

// `pts` as ClockMap keeps them (sorted, strictly increasing). Points without
// RAW (version-1 traces) check nothing.
RawWitness raw_witness(const std::vector<ClockPoint>& pts, uint64_t raw_quantum_ns = 1);

}  // namespace cptrace
