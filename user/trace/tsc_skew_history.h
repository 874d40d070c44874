// The cross-CPU TSC skew a recording measured (meta.json "tsc"): at start, at
// stop and, since the skew watch (record/skew_watch.h), periodically between.
// Every stamp carries the skew as a half-width E around the reference CPU's
// TSC. E holds the start and stop intervals, as before; a periodic interval of
// a CPU that lies wholly outside the hull of that CPU's start and stop
// intervals says its TSC moved away from the others meanwhile (a TSC that
// drifts or stops): it is counted and E widened to hold it (docs/clock.md).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

namespace cptrace {

struct TscSkewHistory {
  using Interval = std::pair<int64_t, int64_t>;  // TSC_k - TSC_ref in [lo, hi] ticks
  std::map<int, Interval> ends;  // per CPU: the hull of its start and stop intervals
  uint64_t periodic = 0;  // periodic measures recorded
  uint64_t periodic_incomplete = 0;  // of them, ones that missed some CPU
  uint64_t moved = 0;  // (measure, CPU) intervals outside that CPU's `ends`
  uint64_t err = 0;  // the half-width every stamp carries (ticks)

  // Malformed values are skipped: the intervals are the recorder's, not
  // something the reader can check.
  static TscSkewHistory from_meta(const nlohmann::json& meta);
  bool watched() const { return periodic > 0; }
};

}  // namespace cptrace
