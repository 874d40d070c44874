// The state of `cptrace top`: counts of a trace still being written, kept so
// that once the recording completes they are exactly those of `cptrace
// throughput` (same ThroughputCounter, same period boundaries).
//
// Two things are not final while the recorder runs:
//  - a kernel-stamped event's TSC: it is interpolated between correlation points,
//    so an event after the last point read is held (`pending`) until a later
//    point arrives; before that it is extrapolated for display only.
//  - the period length: throughput cuts periods with meta.json's tsc_hz, known
//    only at stop. The live view fixes a band [P(1-eps), P(1+eps)] around its
//    estimate; an event whose period index is the same for every length in the
//    band is counted for good, the few near a period boundary are kept as stamps
//    (`guard`) and placed with whatever length is current. If the final length
//    falls outside the band (never seen), the final table is recounted from the file.
#pragma once
#include "tables/memory_budget.h"
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/local_latency.h"
#include "analyze/throughput.h"
#include "clock/clock_map.h"
#include "trace/trace_tail.h"
#include "trace/tsc_skew_history.h"

namespace cptrace {

// A channel named on the command line: its id is the hash of its name (or "0x<hex>").
uint64_t channel_arg_id(const std::string& name);

class LiveView {
 public:
  LiveView(double period_ms, std::vector<std::pair<std::string, std::string>> pairs, const MemoryBudget& budget = {});
  // Events of one frame as recorded (TraceTail::poll).
  void add(const std::vector<TraceEvent>& evs);
  // After a poll: the correlation points and meta.json so far. Fixes the
  // timeline once it can, and counts the held events the new points settle.
  void update(const TraceTail& tail, const nlohmann::json& meta);
  // One refresh as JSON (the --json line; the screen is drawn from it).
  nlohmann::json snapshot(const TraceTail& tail) const;
  // The final table, once meta.json is complete and every frame is read; true
  // in `recounted` when the band missed and it had to be recounted from the file.
  Throughput final_table(const TraceTail& tail, const nlohmann::json& meta, bool& recounted) const;

 private:
  bool ready() const { return band_.has_value(); }
  void settle(const TraceEvent& e);
  void settle_held();
  Throughput table_with(const Timeline& tl, uint64_t period, const ClockMap& map,
                        const std::map<uint64_t, ChannelInfo>& channels) const;
  nlohmann::json pairs_json() const;

  double period_ms_;
  std::vector<std::pair<std::string, std::string>> pair_names_;
  std::vector<SameNodePairing> pairs_;  // once the channel ids are known (ids are name hashes)
  ClockMap map_;
  Timeline tl_;  // provisional: hz estimated, end = last point
  uint64_t period_ = 0;  // ticks, with the provisional hz
  std::optional<std::pair<uint64_t, uint64_t>> band_;  // period lengths the safe counts hold for
  ThroughputCounter safe_;
  std::vector<std::pair<uint64_t, uint64_t>> guard_;  // (channel, TSC) near a boundary
  std::vector<TraceEvent> held_;  // not settled yet (as recorded)
  uint64_t events_ = 0;  // user and close events, as `info` counts them
  uint32_t widest_ = 0;
  // The skew across CPUs meta.json holds so far (measured at start, the
  // recorder writes it then): a TSC stamp's own error, as the reader gives it.
  TscSkewHistory skew_;
};

}  // namespace cptrace
