// Same-node latency: the minimal filler of the latency table (latency_table.h)
// for two channels of ONE node's trace. Cross-node durations come from
// translation, which fills the same table; this file is not the place for them.
//
// Duration = (TSC of the `to` event - TSC of the `from` event) / measured TSC
// frequency. Bound = the clock-correlation error only: a kernel-stamped event was
// mapped to TSC through the correlation stream, whose points are each uncertain
// by their bracket width, so each end may be off by the widest bracket of the
// trace; [value - w, value + w] with w = widest bracket / frequency (a TSC-stamped
// pair is exact to the tick, so this over-covers it).
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "latency/latency_table.h"
#include "latency/latency.h"
#include "tables/rank_select.h"
#include "trace/trace_timeline.h"

namespace cptrace {

// The pairing of same_node_latency(), fed one event at a time (`cptrace top`
// pairs the frames of a trace as they are written).
//
// Memory: while both sides' ids fit `memory_bytes` (~64 bytes each) the pairing
// is exact. Beyond, it settles: each paired id leaves the maps and its duration
// goes to a spillable column (rank_select.h), and from then on an id pairs the
// moment both sides have it. A live view then no longer sees a repeat of an id
// that was already paired (it counts as a new, unmatched one) nor an earlier
// stamp that arrives after the pair; ids pending beyond the budget (one side
// only) are dropped and counted as unmatched. `windowed()` says so.
// The widest correlation bracket of `map`, in ticks: the bound of each end of a
// same-node duration.
// A same-node duration's bound (ticks): the widest bracket, or twice the largest
// conversion error of a kernel stamp; saturates at INT64_MAX (a damaged trace's).
int64_t pair_bound(uint32_t widest, uint64_t max_err);
uint32_t widest_bracket(const ClockMap& map);

class SameNodePairing {
 public:
  SameNodePairing(uint64_t from, uint64_t to, uint64_t memory_bytes = ~0ull >> 1, std::string spill_dir = "/tmp")
      : from_(from),
        to_(to),
        max_ids_(std::max<uint64_t>(1024, memory_bytes / 2 / kBytesPerId)),
        pool_{memory_bytes / 2, 0},
        spill_dir_(std::move(spill_dir)) {}
  bool windowed() const { return settled_ != nullptr; }
  uint64_t from() const { return from_; }
  uint64_t to() const { return to_; }
  // A user event, ts in TSC; other kinds and channels are ignored.
  void add(const TraceEvent& e);
  // The durations of the tuples seen on both sides so far. `widest`: the widest
  // correlation bracket of the trace, in ticks (the bound of each end).
  LatencySeries series(const Timeline& tl, uint32_t widest, const std::string& from_name, const std::string& to_name,
                       const std::string& node) const;
  // summarize(series(...)) without the per-tuple rows: one duration per paired
  // tuple, sorted once (the live view asks every refresh). `unmatched`: tuples
  // on `from` only and on `to` only.
  LatencySummary summary(const Timeline& tl, uint32_t widest, std::pair<uint64_t, uint64_t>& unmatched) const;

 private:
  static constexpr uint64_t kBytesPerId = 64;  // an unordered_map node and its bucket
  void settle();
  LatencySummary settled_summary(const Timeline& tl, uint32_t widest, std::pair<uint64_t, uint64_t>& unmatched) const;
  uint64_t from_, to_;
  // File order is only roughly time order: the earliest stamp of each tuple per side.
  std::unordered_map<uint64_t, uint64_t> a_, b_;
  uint64_t max_ids_;
  MemoryPool pool_;
  std::string spill_dir_;
  std::unique_ptr<ValueColumn> settled_;  // durations (ticks) of ids paired beyond the budget
  long double settled_ticks_ = 0;  // ... their sum, for the mean
  uint64_t dropped_from_ = 0, dropped_to_ = 0;
  uint64_t duplicates_ = 0;
  // The largest conversion error of a paired-side event (TraceEvent::ts_err):
  // under NTP slewing it can exceed the widest bracket.
  uint64_t max_err_ = 0;
  double bound_s(const Timeline& tl, uint32_t widest) const {
    return tl.ticks_to_s(double(pair_bound(widest, max_err_)));
  }
};

// Pairs events by tuple id (the earliest stamp on each side, as SameNodePairing;
// user events only), through the tuple join (tables/tuple_join.h): within
// `budget` whatever the trace's length.
LatencySeries same_node_latency(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to,
                                const MemoryBudget& budget = {});

// `cptrace latency` on one node's own trace: one node needs no translation, so
// its rows come straight from the trace, in the shape of a translated run's
// (latency.h) so that every output of the command is the same: one node, paired
// with itself, scenario "same-node". Pairing and bound as same_node_latency():
// ticks = TSC difference, [ticks - w, ticks + w] with w the widest correlation
// bracket or twice the largest conversion error; for two stamps that name their
// CPUs, the sum of those CPUs' skews (none for one CPU). ns over the trace's frequency
// interval (first to last correlation point, as translate measures the
// reference's), so that they stay strict; none with fewer than two points.
// Within `budget` (the join takes half, the rows a quarter) whatever its length.
LatencyResult node_latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                                  const MemoryBudget& budget);

}  // namespace cptrace
