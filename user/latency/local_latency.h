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
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "latency/latency_table.h"
#include "latency/latency.h"
#include "tables/rank_select.h"
#include "tables/tuple_join.h"
#include "trace/trace_timeline.h"
#include "translate/stamp_errors.h"

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

// A same-node pair's half-width (ticks): none for two stamps of one CPU's TSC
// (exact in ticks); the sum of both stamps' own errors, their CPUs' skews,
// where both name their CPU (no conversion: the bracket does not apply); else
// the node-wide pair_bound() over the stamps of both channels (kNodeWide until
// the widest bracket is known), which is never below the others.
class SameNodeWidth {
 public:
  static constexpr int64_t kNodeWide = std::numeric_limits<int64_t>::max();
  void add(const TraceEvent& e) { errs_.add(e.ts_err, e.timebase == uint8_t(Timebase::TscOnCpu), e.cpu); }
  int64_t of_cpus(const JoinStamp& a, const JoinStamp& b) const {
    if (one_cpu(a, b)) return 0;
    if (!a.cpu_stamped || !b.cpu_stamped) return kNodeWide;
    const uint64_t ea = errs_.of(true, a.cpu), eb = errs_.of(true, b.cpu), cap = uint64_t(kNodeWide - 1) / 2;
    return ea > cap || eb > cap ? kNodeWide - 1 : int64_t(ea + eb);
  }
  int64_t node_wide(uint32_t widest) const { return pair_bound(widest, errs_.any()); }
  int64_t operator()(const JoinStamp& a, const JoinStamp& b, uint32_t widest) const {
    const int64_t w = of_cpus(a, b);
    return w == kNodeWide ? node_wide(widest) : w;
  }

 private:
  StampErrors errs_;
};

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
  // An id's earliest stamp on one side, and its CPU where it names one.
  struct Stamp {
    uint64_t ts;
    uint16_t cpu;
    bool cpu_stamped;
    JoinStamp join() const { return {ts, 0, 0, 0, 0, cpu, cpu_stamped}; }
  };
  void settle();
  LatencySummary settled_summary(const Timeline& tl, uint32_t widest, std::pair<uint64_t, uint64_t>& unmatched) const;
  uint64_t from_, to_;
  // File order is only roughly time order: the earliest stamp of each tuple per side.
  std::unordered_map<uint64_t, Stamp> a_, b_;
  uint64_t max_ids_;
  MemoryPool pool_;
  std::string spill_dir_;
  // Ids paired beyond the budget: their durations and half-widths (ticks;
  // SameNodeWidth::kNodeWide for the node-wide one, known at summary time).
  std::unique_ptr<ValueColumn> settled_, settled_widths_;
  long double settled_ticks_ = 0;  // ... their sum, for the mean
  // ... their extremes: min(d - w) and max(d + w) over the ones of a width of
  // their own, min(d) and max(d) over the node-wide ones.
  struct Extremes {
    int64_t lo_d = 0, lo_w = 0, hi_d = 0, hi_w = 0;  // the pairs giving min(d - w) and max(d + w)
    bool any = false;
    void add(int64_t d, int64_t w);
  } settled_own_, settled_node_;
  uint64_t dropped_from_ = 0, dropped_to_ = 0;
  uint64_t duplicates_ = 0;
  // The stamps' own errors (TraceEvent::ts_err) of both channels' events: under
  // NTP slewing a converted stamp's can exceed the widest bracket.
  SameNodeWidth width_;
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
