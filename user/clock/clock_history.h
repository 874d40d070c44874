// What a recording saw of its node's clock, as the clock models need it: the
// correlation points, the adjustments, and the facts of meta.json they rest on,
// read once. The reader builds it (TraceReader::clock_history) and hands it to
// the models (clock_change_candidates, clock_rate_envelope), which so never
// read the reader back.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

#include <nlohmann/json.hpp>

#include "clock/clock_point.h"
#include "clock/clock_adjustment.h"

namespace cptrace {

struct ClockHistory {
  std::span<const ClockPoint> points;  // the correlation stream, in order
  std::span<const ClockAdjustment> adjustments;  // ClockAdjust frames, in order
  // meta.json "clock_discipline": the watch of clock calls ran...
  bool syscalls_watched = false;
  // ...and said how many call records it dropped (nullopt: it did not say).
  std::optional<uint64_t> syscalls_dropped;
  // meta.json "start": REALTIME - MONOTONIC when the recording started.
  std::optional<int64_t> start_rt_minus_mono_ns;

  // Every call seen: watched, and none dropped (a missing count is not "none").
  bool every_call_seen() const { return syscalls_watched && syscalls_dropped == uint64_t(0); }
  // Some call records were dropped: changes nobody saw may lie anywhere.
  bool calls_dropped() const { return syscalls_dropped.value_or(0) > 0; }

  // The meta.json facts above; malformed values count as absent.
  static ClockHistory from_meta(const nlohmann::json& meta, std::span<const ClockPoint> points,
                                std::span<const ClockAdjustment> adjustments);
};

}  // namespace cptrace
