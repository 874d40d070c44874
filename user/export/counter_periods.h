// The period of a `counter` handler's series point (EventKind::Count): a point
// carries its channel, its CPU, the start of its period and the count, but not
// the period's length, which is in the handler history (probe/handlers.h).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct CounterRule {
  uint64_t period_ns = 0;  // the handler's PERIOD (cp_logTS periods: CLOCK_MONOTONIC)
  uint64_t period_ticks = 0;  // the same in TSC ticks (batch-path periods)
};

class CounterPeriods {
 public:
  // history: TraceReader::handler_changes(); malformed entries are skipped.
  explicit CounterPeriods(const nlohmann::json& history);
  // The counter rule a point of `channel` starting at TSC `start` was counted
  // under: the channel's own rule if one was installed by the end of that period,
  // else the default's (channel 0); the latest such install wins. period_ns == 0
  // when the history names no counter rule for it (a damaged trace).
  CounterRule at(uint64_t channel, uint64_t start) const;

 private:
  struct Install {
    uint64_t channel, tsc;  // tsc: the instant the map update began
    bool counter;
    CounterRule rule;
  };
  std::vector<Install> installs_;  // in history order
};

}  // namespace cptrace
