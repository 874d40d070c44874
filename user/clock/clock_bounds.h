// Strict CLOCK_MONOTONIC -> TSC conversion while NTP adjusts the clock
// (DESIGN.md, "Time"; docs/clock.md has the derivation and the figures).
//
// The facts it rests on. The kernel's CLOCK_MONOTONIC is a continuous,
// increasing, piecewise-linear function of the clocksource's counter: its rate
// changes only when the timekeeper applies a new NTP tick length (after an
// adjtimex/clock_adjtime call, at a second boundary while a PLL/FLL or adjtime()
// slew is in progress), plus a dither of one unit of `mult` between ticks (well
// under kDitherPpm). A correlation point brackets the TSC at one mono reading:
// tau(m_i) in [a_i, b_i].
//
// The model (the one assumption, checked against the data): within any three
// consecutive segments between correlation points the rate changes at most
// once (beyond the dither). Then for a stamp m in segment i, either
//  H0: segment i has one rate (its own average, known from its two points), or
//  H1: the rate changes once inside segment i, at some c, from segment i-1's
//      rate to segment i+1's (each known from its own points);
// and the bound is the union of what each hypothesis that fits the data
// allows. H0 fits only if segment i's rate agrees with a neighbour's (the one
// change is elsewhere); H1 fits only if some c in segment i joins the two
// neighbours' lines through segment i's points. Under a real change H0 does not
// fit and H1 pins the stamp to within about one bracket width, whatever the
// size of the change (a 10 % tick change included).
//
// Checked, not trusted: a segment where neither hypothesis fits, or whose
// three-segment window holds two or more witnessed possible rate changes
// (`ClockChange`s, from the recorded clock adjustments), falls back to the
// assumption-free bound [a_i, b_{i+1}] (the clock is monotonic) and is counted:
// wider, never wrong. H1's two-segment neighbour baselines reach one segment
// further on each side, so they are used only where the window centred there
// holds fewer than two witnessed changes too; and an end segment (no neighbour
// beyond it, so H1 cannot be weighed) that a witnessed change may fall into
// falls back as well. Where the witnessed discipline bounds the rate itself
// (clock_rate_envelope.h), a violated or crowded segment is bounded at that
// envelope's rates from both of its points instead.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "clock/clock_point.h"

namespace cptrace {

// A possible change of the clock's rate, witnessed: if it changed the rate at
// all, the new rate took effect at some CLOCK_MONOTONIC instant in
// [from_ns, to_ns] (clock_change_candidates.h says where these come from).
struct ClockChange {
  uint64_t from_ns = 0, to_ns = 0;
  auto operator<=>(const ClockChange&) const = default;
};

// Strict bounds on one instant, in TSC ticks: lo <= true <= hi.
struct TscBounds {
  uint64_t lo = 0, hi = 0;
};

// How each segment's bound was obtained (for `info` and translate's report).
struct ClockModelStats {
  uint64_t segments = 0;
  uint64_t one_rate = 0;  // only H0 fits
  uint64_t rate_change = 0;  // only H1 fits
  uint64_t either = 0;  // both fit (no change, or a change too small to tell)
  uint64_t violated = 0;  // neither fits: the model's assumption fails here
  uint64_t crowded = 0;  // >= 2 witnessed changes in the window: not checkable
  uint64_t departed = 0;  // CLOCK_MONOTONIC_RAW left its TSC line in the window (raw_witness.h)
  // Of the RAW departures, how many were the TSC changing its rate (each one a
  // segment, departed with its neighbours): the line splits there (ClockMap).
  uint64_t tsc_rate_changes = 0;
  uint64_t fallback() const { return violated + crowded + departed; }
  // Of the violated and crowded, how many the rate envelope still bounds
  // (clock_rate_envelope.h): wider than the model, narrower than the fallback.
  uint64_t enveloped = 0;
};

// How the clock reads: in steps of `quantum_ns` (1 for a nanosecond clocksource;
// hpet ~70, Hyper-V's TSC page 100, acpi_pm 279), measured by the recorder
// (clock_quantum.h). A reading is the true value truncated to a step.
struct ClockReading {
  uint64_t quantum_ns = 1, raw_quantum_ns = 1;
};

// Relative slack on every segment's rate for the timekeeper's mult dither: one
// unit of mult is ~0.1-0.3 ppm for tsc and kvm-clock clocksources.
constexpr long double kDitherPpm = 1.0L;

// TSC ticks per CLOCK_MONOTONIC ns that the clock's rate stays within over the
// whole recording, when that is known (clock_rate_envelope.h); lo = 0: unknown.
struct TicksPerNs {
  long double lo = 0, hi = 0;
  bool known() const { return lo > 0 && hi >= lo; }
};

class ClockBounds {
 public:
  ClockBounds() = default;
  // `pts` sorted, strictly increasing in both clocks (ClockMap's invariant);
  // `changes` in any order; `faults`: segments where the clock moved against
  // the TSC (raw_witness.h), which fall back with their neighbours.
  // `envelope`: where known, a segment the model cannot vouch for (violated or
  // crowded, not departed: RAW itself left the TSC there) is bounded at that
  // rate from both of its points instead of by monotonicity alone.
  ClockBounds(const std::vector<ClockPoint>& pts, std::vector<ClockChange> changes,
              std::vector<ClockChange> faults = {}, ClockReading reading = {}, TicksPerNs envelope = {});

  // Throws std::domain_error with fewer than two points. Beyond the ends the end
  // segment's rate is extrapolated (not strict: stamps there are counted by
  // callers as outside the stream).
  TscBounds mono_to_tsc(uint64_t mono_ns) const;
  const ClockModelStats& stats() const { return stats_; }

 private:
  struct Rate {
    long double lo = 0, hi = 0;  // ticks per ns
  };
  static Rate intersect(Rate x, Rate y) { return {x.lo > y.lo ? x.lo : y.lo, x.hi < y.hi ? x.hi : y.hi}; }
  enum class Fit : uint8_t { Both, H0, H1, Violated, Crowded, Departed };
  struct Segment {
    Fit fit = Fit::Both;
    Rate own, before, after;  // before/after: the neighbours' rates (H1)
    long double c_lo = 0, c_hi = 0;  // where H1's change can lie (mono ns)
    bool enveloped = false;  // fallen back, and bounded by the envelope instead
  };

  void classify(size_t i);
  size_t changes_in(long double lo, long double hi) const;
  bool fault_in(long double lo, long double hi) const;
  Rate rate(size_t j, size_t k, long double slack) const;
  bool h1_window(size_t i, Rate ra, Rate rb, long double& c_lo, long double& c_hi) const;
  void at_rate(size_t i, const Rate& r, long double m, long double& lo, long double& hi) const;
  void h0(size_t i, long double m, long double& lo, long double& hi) const;
  void h1(size_t i, long double m, long double& lo, long double& hi) const;
  void in_envelope(size_t i, long double m, long double& lo, long double& hi) const;

  std::vector<long double> m_, a_, b_;  // points: mono ns, bracket lo/hi (ticks)
  std::vector<Segment> seg_;
  std::vector<ClockChange> changes_;  // sorted by from_ns
  std::vector<ClockChange> faults_;
  long double quantum_ = 1;  // CLOCK_MONOTONIC's reading step, ns
  Rate envelope_;  // lo = 0: unknown
  uint64_t longest_change_ = 0;  // the widest [from_ns, to_ns]
  ClockModelStats stats_;
};

}  // namespace cptrace
