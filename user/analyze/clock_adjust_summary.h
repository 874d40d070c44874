// The clock adjustments a recording saw, as `info` and `report` show them: each
// change (an adjusting syscall, a change of the NTP state, a step of the wall
// clock) with its instant since the recording's first correlation point.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_reader.h"

namespace cptrace {

struct ClockAdjustLine {
  double at_s = 0;  // since the first correlation point (CLOCK_MONOTONIC)
  uint64_t mono_ns = 0;
  uint64_t tsc = 0;
  std::string kind;  // "syscall", "state", "step"
  std::string text;  // "adjtimex by chronyd[812]: frequency +200.000 ppm"
};

struct ClockAdjustSummary {
  std::string state_at_start;  // NtpState::describe() of the first state ("" when none was recorded)
  std::vector<ClockAdjustLine> changes;  // adjusting syscalls, state changes, steps; in time order
  nlohmann::json to_json() const;
};

ClockAdjustSummary summarize_clock_adjustments(const TraceReader& r);

}  // namespace cptrace
