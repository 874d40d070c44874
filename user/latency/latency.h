// `cptrace latency OUT --from CHANNEL --to CHANNEL`: per tuple id, the duration
// from its event on one channel to its event on the other, on the reference
// node's clock, with a strict bound, from a translated trace (translate.h).
//
// Each duration is bounded by the tightest scenario that applies, reported per
// tuple (duration_bounds.h). Durations in ns use the reference's measured TSC
// frequency interval, so the ns bound is strict too (lo / hz_hi, hi / hz_lo:
// ticks_to_ns.h).
//
// Memory: rows are produced by a tuple-id join (tuple_join.h) within a budget
// (memory_budget.h), spilled and merged beyond it (latency_rows.h), and handed
// out as a stream (LatencyResult::for_each_row); latency() keeps them all in
// memory.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/channel_pair.h"
// What a row is bounded by and how its ns are made: their users come through here.
#include "latency/duration_bounds.h"
#include "latency/ticks_to_ns.h"
#include "tables/memory_budget.h"
#include "tables/tuple_join.h"
#include "translate/translated_frame.h"

namespace cptrace {

class TraceReader;
struct LatencyRow;

// The rows of one channel pair in to-event order, from memory or spill files,
// readable any number of times.
class LatencyRowSource {
 public:
  virtual ~LatencyRowSource() = default;
  virtual void for_each(const std::function<void(const LatencyRow&)>& fn) const = 0;
};

struct LatencyRow {
  uint64_t tuple = 0;
  uint16_t from_node = 0, to_node = 0;
  const char* scenario = "";
  int64_t ticks = 0, ticks_lo = 0, ticks_hi = 0;  // reference TSC ticks
  int64_t ns = 0, ns_lo = 0, ns_hi = 0;  // 0 when the frequency is unknown
  int64_t from_ref = 0;  // the from-event's instant on the reference TSC (estimate), for plots over time
  bool local() const { return from_node == to_node; }
};

struct LatencyResult {
  std::vector<LatencyRow> rows;  // in order of the to-channel events (latency() only)
  std::shared_ptr<const LatencyRowSource> stream;  // the same, streamed (latency_stream() only)
  uint64_t row_count = 0;
  uint64_t partitions = 1;  // > 1: the join spilled (tuple_join.h)
  MemoryBudget budget;  // what produced it; the summaries take their share of it
  // fn(row) over the rows, in order, whichever way they are held.
  void for_each_row(const std::function<void(const LatencyRow&)>& fn) const;
  // The join's counts and `rows` as its streamed rows (every latency_stream kind).
  void take_join(const JoinCounts& c, std::shared_ptr<const LatencyRowSource> rows);
  std::vector<std::string> node_names;
  uint64_t from_only = 0, to_only = 0;  // tuples seen on one channel only
  uint64_t from_duplicates = 0, to_duplicates = 0;  // repeated tuple ids (first one used)
  bool have_ns = false;
  std::string method;  // translate --method of the trace
  uint64_t ref_origin = 0;  // the reference node's first TSC reading (its span start)
  double hz = 0;  // reference TSC frequency estimate (0 when unknown)
  double hz_lo = 0, hz_hi = 0;  // its strict interval (0 when unknown)
  std::vector<std::string> unauthenticated;  // "A->B": node pairs whose MinRTT rounds had no key
};

// Throws std::runtime_error on an unknown channel or a trace that is not translated.
LatencyResult latency(const std::string& dir, const std::string& from, const std::string& to);
// The same on an open reader (the report reuses it; run_latency goes through it too).
LatencyResult latency(const TraceReader& r, const std::string& from, const std::string& to);
// The channel id of `name` (full name or label) in trace `r`; throws naming the
// channels the trace has when there is none.
uint64_t latency_channel(const TraceReader& r, const std::string& name);
// The rows as a stream, within `budget` whatever the run's length.
LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget);
// The Translated events of a trace, frame by frame in file order: feed(fn)
// calls fn on each run of them until the last, or throws as reading the
// frames would.
using TranslatedSink = std::function<void(const std::vector<TranslatedEvent>&)>;
using TranslatedFeed = std::function<void(const TranslatedSink&)>;
// latency_stream on the events `feed` gives instead of a read of r's frames
// (r still gives the channels, nodes and meta.json), for a caller that decodes
// them anyway (export table). The feed gives at least every User event of the
// two channels, in file order: the same rows.
LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget, const TranslatedFeed& feed);
// The rows of several channel pairs (from, to) from one read of the trace:
// result i is latency_stream's for pairs[i]. The events of each channel are
// held once, however many pairs name it, and the pairs joined from there; each
// distinct pair's rows and result take an equal share of `budget`. Throws as
// latency_stream, on the first unknown channel in pairs' order.
std::vector<LatencyResult> latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs,
                                           const MemoryBudget& budget);
// The same, each result handed to fn(i, result) (i: its index in pairs; a pair
// asked twice comes once per index) as soon as its pair is joined, and its rows
// dropped when fn returns: while the channels' events fit in memory only one
// pair's rows live at a time, so each result takes 0.45 of `budget` (not an
// equal share) and spills less. fn's work on a result stays within that
// result's budget.
void latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs, const MemoryBudget& budget,
                     const std::function<void(size_t, const LatencyResult&)>& fn);
// A translated trace's result without rows: what its meta.json says of every
// pair (nodes, method, frequency). Throws as latency_stream on a trace that is
// not translated.
LatencyResult latency_header(const TraceReader& r);
// The sync findings a trace was translated despite (--accept-suspect-sync):
// throws naming them unless accept (then the caller prints the warnings); none
// for a trace that is not translated (latency_source.cpp).
struct SyncFinding;
std::vector<SyncFinding> suspect_findings(const std::string& dir, bool accept);
// The same on an open reader of `dir` (one scan of the trace, not one per step).
std::vector<SyncFinding> suspect_findings(const TraceReader& r, const std::string& dir, bool accept);

}  // namespace cptrace
