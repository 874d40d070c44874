// The cross-CPU TSC skew a recording measured (meta.json "tsc"): at start, at
// stop and, since the skew watch (clock/skew_watch.h), periodically between.
// Every stamp carries the skew as a half-width E around the reference CPU's
// TSC. E holds the start and stop intervals, as before; a periodic interval of
// a CPU that lies wholly outside the hull of that CPU's start and stop
// intervals says its TSC moved away from the others meanwhile (a TSC that
// drifts or stops): it is counted and E widened to hold it (docs/clock.md).
// A stamp that names its CPU carries that CPU's interval only.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "trace/trace_format.h"

namespace cptrace {

struct TscSkewHistory {
  using Interval = std::pair<int64_t, int64_t>;  // TSC_k - TSC_ref in [lo, hi] ticks
  std::map<int, Interval> ends;  // per CPU: the hull of its start and stop intervals
  uint64_t periodic = 0;  // periodic measures recorded
  uint64_t periodic_incomplete = 0;  // of them, ones that missed some CPU
  uint64_t moved = 0;  // (measure, CPU) intervals outside that CPU's `ends`
  uint64_t err = 0;  // the half-width a stamp of an unknown CPU carries (ticks)
  // The reference CPU of every measure (the CPUs' TSCs are measured against it),
  // when all name the same one; and, per other CPU, the half-width of its own
  // intervals (its ends, and any periodic one outside them).
  std::optional<int> reference_cpu;
  std::map<int, uint64_t> cpu_err;

  // The half-width of a stamp read on `cpu` (a TscOnCpu event): none on the
  // reference CPU, whose TSC the node's clock relation and instants are on; its
  // own interval's on a measured CPU; else `err`.
  uint64_t err_on(int cpu) const;
  // The half-width of a TSC stamp (timebase Tsc or TscOnCpu) as readers give
  // it: its CPU's where it names one, else `err`.
  uint64_t err_of(const TraceEvent& e) const {
    return e.timebase == static_cast<uint8_t>(Timebase::TscOnCpu) ? err_on(e.cpu) : err;
  }

  // Malformed values are skipped: the intervals are the recorder's, not
  // something the reader can check.
  static TscSkewHistory from_meta(const nlohmann::json& meta);
  bool watched() const { return periodic > 0; }
};

}  // namespace cptrace
