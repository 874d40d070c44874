// TSC <-> CLOCK_MONOTONIC correlation: taking a point, and converting between the
// two timebases over a stream of points (DESIGN.md, "Time").
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_bounds.h"
#include "clock/clock_rate_envelope.h"
#include "clock/raw_witness.h"
#include "clock/tsc_frequency.h"

namespace cptrace {

// Tightest of `brackets` (lfence; rdtsc) / clock_gettime(CLOCK_MONOTONIC) / rdtscp
// brackets: tsc is the bracket midpoint, width_ticks its width (the error of the
// point). x86-64 only.
// Also fills the version-2 fields (clock_point.h): CLOCK_MONOTONIC_RAW from its own
// brackets and CLOCK_REALTIME - CLOCK_MONOTONIC, read after the MONOTONIC brackets.
ClockPoint sample_clock_point(int brackets = 9);

// Piecewise-linear map between TSC ticks and CLOCK_MONOTONIC ns over correlation
// points. Between two neighbouring points it interpolates; beyond the ends it
// extrapolates with the slope of the end segment. Both directions are monotonic
// non-decreasing, saturate at 0 and UINT64_MAX instead of wrapping, and are exact
// at the points. Arithmetic is 128-bit, so TSC values ~1e15 over hours are fine.
class ClockMap {
 public:
  ClockMap() = default;
  // Sorts by TSC and drops every point that does not advance both clocks strictly
  // (duplicates, and points contradicting their predecessor). Checks the points'
  // CLOCK_MONOTONIC_RAW against the TSC (raw_witness.h): segments off the line
  // fall back in the model, as do `faults` known otherwise (a clocksource
  // switch). `reading`: the clocks' reading quanta. `envelope`: the rate the
  // discipline allowed against RAW (clock_rate_envelope.h), turned into TSC
  // ticks per ns through RAW's own line when RAW held one line throughout.
  explicit ClockMap(std::vector<ClockPoint> pts, std::vector<ClockChange> changes = {}, ClockReading reading = {},
                    std::vector<ClockChange> faults = {}, RateEnvelope envelope = {});

  bool empty() const { return pts_.empty(); }
  const std::vector<ClockPoint>& points() const { return pts_; }
  // Both throw std::domain_error when there are fewer than two points: one point
  // gives no slope, and guessing a frequency would hide the problem.
  uint64_t mono_to_tsc(uint64_t mono_ns) const;
  uint64_t tsc_to_mono(uint64_t tsc) const;
  // Strict bounds on the TSC at a CLOCK_MONOTONIC stamp while NTP adjusts the
  // clock (clock_bounds.h: the model, its assumption and how it is checked).
  // Same exception as mono_to_tsc.
  TscBounds mono_to_tsc_bounds(uint64_t mono_ns) const { return bounds_.mono_to_tsc(mono_ns); }
  // A kernel stamp as the reader hands it out: mono_to_tsc's estimate (moved
  // into the bounds when it falls outside) and the half-width `err` of the
  // smallest interval around it that holds the bounds (TraceEvent::ts_err).
  struct Stamp {
    uint64_t ts = 0;
    uint64_t err = 0;  // full width: a long fallback segment's seconds, never clamped
  };
  Stamp mono_to_stamp(uint64_t mono_ns) const;
  const ClockModelStats& model_stats() const { return stats_; }
  const RawWitness& raw_witness() const { return raw_; }
  const ClockReading& reading() const { return reading_; }
  // Measured TSC frequency: least-squares slope of tsc over CLOCK_MONOTONIC_RAW
  // (over mono_ns for points without RAW), in ticks per second; 0 with fewer
  // than two points. After a TSC rate change (model_stats().tsc_rate_changes)
  // it is the run's average, an estimate; strict intervals come from
  // tsc_frequency.
  double tsc_hz() const;
  // The strict TSC frequency interval between points i < j, in the clock's
  // reading quantum, widened across TSC rate changes (tsc_frequency.h).
  std::optional<TscFrequency> tsc_frequency(size_t i, size_t j) const;

 private:
  std::vector<ClockPoint> pts_;
  RawWitness raw_;
  ClockReading reading_;
  ClockBounds bounds_;
  ClockModelStats stats_;
};

// How a node's kernel stamps were bounded (clock_bounds.h), for translate's
// meta.json and `info`: the model's segments by hypothesis and by why they fell
// back, the RAW witness's count, the reading quantum.
nlohmann::json clock_model_json(const ClockMap& map);

}  // namespace cptrace
