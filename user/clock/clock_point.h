// One correlation point between this node's TSC and its kernel clocks
// (CLOCK_MONOTONIC, and with version 2 CLOCK_MONOTONIC_RAW and CLOCK_REALTIME):
// what every clock model of clock/ is built from. The trace format stores it as
// it is (trace/trace_format.h: Clock and Clock2 frames).
#pragma once
#include <cstdint>

namespace cptrace {

// ClockPoint::flags.
constexpr uint32_t kClockHasRaw = 1;  // raw_tsc, raw_ns, raw_width_ticks are set
constexpr uint32_t kClockHasRealtime = 2;  // rt_minus_mono_ns, rt_width_ns are set

// One TSC <-> CLOCK_MONOTONIC correlation: the tightest of several
// rdtsc / clock_gettime / rdtsc brackets. tsc is the bracket midpoint,
// width_ticks the bracket width (the error of this point).
//
// Version 2 (Clock2 frames) adds, each read OUTSIDE the MONOTONIC bracket so that
// bracket stays as tight as before, with its own error:
//  - CLOCK_MONOTONIC_RAW (never NTP-adjusted): its own tightest bracket, midpoint
//    raw_tsc, width raw_width_ticks. The TSC rate against RAW is the crystal's,
//    whatever NTP does to MONOTONIC.
//  - CLOCK_REALTIME - CLOCK_MONOTONIC, which the kernel keeps exactly constant
//    between steps: the true offset lies in [rt_minus_mono_ns, rt_minus_mono_ns +
//    rt_width_ns] (a REALTIME read between two MONOTONIC reads; two such reads had
//    to agree, so no step happened inside the measurement).
// Points of version-1 traces have flags == 0 and these fields 0.
struct ClockPoint {
  uint64_t tsc = 0;
  uint64_t mono_ns = 0;
  uint32_t width_ticks = 0;
  uint32_t flags = 0;  // kClockHas*; 0 (was `reserved`) in version-1 frames
  uint64_t raw_tsc = 0;
  uint64_t raw_ns = 0;
  uint32_t raw_width_ticks = 0;
  uint32_t rt_width_ns = 0;
  int64_t rt_minus_mono_ns = 0;
  bool has_raw() const { return flags & kClockHasRaw; }
  bool has_realtime() const { return flags & kClockHasRealtime; }
  bool operator==(const ClockPoint&) const = default;
};
static_assert(sizeof(ClockPoint) == 56);

}  // namespace cptrace
