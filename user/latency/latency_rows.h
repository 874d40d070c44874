// The rows of `latency`: each joined pair of events bounded (duration_bounds.h)
// on every thread, kept in to-event order by a merge of runs (run_merge.h) in
// memory or spilled, and expanded to LatencyRow (ns from ticks) as they are read.
// Templates on the row as the merge holds it (48 or 56 bytes), inline because
// every row of a trace goes through them.
#pragma once
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "latency/duration_bounds.h"
#include "latency/latency.h"
#include "latency/ticks_to_ns.h"
#include "tables/parallel_for.h"
#include "tables/run_merge.h"
#include "tables/tuple_join.h"
#include "translate/translated_frame.h"

namespace cptrace::latency_join {

// A row as the merge holds it: its to-event's position (the key that puts the
// partitions' rows back in trace order) and what the row cannot be computed
// from (ns follow from ticks, the scenario is an index): 56 bytes, not 88.
struct WideRow {
  uint64_t seq, tuple;
  int64_t ticks, ticks_lo, ticks_hi, from_ref;
  uint16_t from_node, to_node;
  uint8_t scenario;
  uint64_t key() const { return seq; }
  uint16_t from() const { return from_node; }
  uint16_t to() const { return to_node; }
};
// The same in 48 bytes, where the trace allows: the position (below 2^48) and
// both nodes (below 256) in one word, whose order is the position's (positions
// are distinct), and no scenario: it follows from the two nodes (ScenarioTable).
struct CompactRow {
  static constexpr uint64_t kMaxSeq = 1ull << 48, kMaxNodes = 256;
  uint64_t seq_nodes, tuple;
  int64_t ticks, ticks_lo, ticks_hi, from_ref;
  uint64_t key() const { return seq_nodes; }
  uint16_t from() const { return uint16_t(seq_nodes >> 8 & 0xff); }
  uint16_t to() const { return uint16_t(seq_nodes & 0xff); }
};
static_assert(sizeof(CompactRow) == 48);
template <typename Row>
struct RowKey {
  uint64_t operator()(const Row& r) const { return r.key(); }
};

inline constexpr const char* kScenarios[] = {"local-reference", "local", "reference-remote",
                                             "remote-remote-via-reference", "remote-remote-direct"};
inline uint8_t scenario_index(const char* s) {
  // The same literals as DurationBounds::duration's, mostly at the same
  // address: a pointer compared first, the text only when it differs.
  for (uint8_t i = 0; i < std::size(kScenarios); ++i)
    if (kScenarios[i] == s) return i;
  for (uint8_t i = 0; i < std::size(kScenarios); ++i)
    if (!strcmp(kScenarios[i], s)) return i;
  throw std::logic_error(std::string("unlisted latency scenario ") + s);
}

// Which scenario DurationBounds::duration takes for a node pair: it chooses by
// the nodes alone (same node, the reference, a direct relation). Every row
// checks its scenario against this table when it is made, so a compact row
// (which does not hold one) cannot come back with another.
class ScenarioTable {
 public:
  explicit ScenarioTable(const DurationBounds& sc) : nodes_(sc.names.size()) {
    if (nodes_ > CompactRow::kMaxNodes) return;  // wide rows hold their own
    at_.resize(nodes_ * nodes_);
    for (size_t a = 0; a < nodes_; ++a)
      for (size_t b = 0; b < nodes_; ++b)
        at_[a * nodes_ + b] = a == b                       ? (a == sc.ref ? 0 : 1)
                              : a == sc.ref || b == sc.ref ? 2
                              : sc.direct.count({a, b})    ? 4
                                                           : 3;
  }
  uint8_t of(uint16_t a, uint16_t b) const { return at_[a * nodes_ + b]; }

 private:
  size_t nodes_;
  std::vector<uint8_t> at_;
};

inline WideRow make_row(const WideRow*, uint64_t seq, uint64_t tuple, const Bound& d, int64_t from_ref, uint16_t a,
                        uint16_t b, uint8_t scenario, const ScenarioTable&) {
  return {seq, tuple, d.est, d.lo, d.hi, from_ref, a, b, scenario};
}
inline CompactRow make_row(const CompactRow*, uint64_t seq, uint64_t tuple, const Bound& d, int64_t from_ref,
                           uint16_t a, uint16_t b, uint8_t scenario, const ScenarioTable& table) {
  if (table.of(a, b) != scenario) throw std::logic_error("latency scenario not the node pair's");
  return {seq << 16 | uint64_t(a) << 8 | b, tuple, d.est, d.lo, d.hi, from_ref};
}
inline uint8_t scenario_of(const WideRow& r, const ScenarioTable&) { return r.scenario; }
inline uint8_t scenario_of(const CompactRow& r, const ScenarioTable& table) { return table.of(r.from(), r.to()); }

// Rows computed or expanded on the threads at a time (fixed memory: ~0.5 MB of
// pairs, ~0.7 MB of expanded rows), in chunks of kRowChunk per task.
constexpr size_t kRowBatch = 1 << 13;
constexpr size_t kRowChunk = 1 << 10;

template <typename Row>
class MergedRows : public LatencyRowSource {
 public:
  MergedRows(uint64_t bytes, const std::string& dir, const LatencyResult& res, const ScenarioTable& table)
      : rows(bytes, dir),
        table_(table),
        have_ns_(res.have_ns),
        to_ns_(res.hz, res.hz_lo, res.hz_hi),
        threads_(res.budget.thread_count()) {}
  // The rows expanded (ns from ticks) a batch at a time on every thread, handed
  // out in order.
  void for_each(const std::function<void(const LatencyRow&)>& fn) const override {
    std::vector<Row> in;
    std::vector<LatencyRow> out(kRowBatch);
    in.reserve(kRowBatch);
    auto flush = [&] {
      const size_t n = in.size(), chunks = (n + kRowChunk - 1) / kRowChunk;
      parallel_for(threads_, chunks, [&](size_t ch, unsigned) {
        for (size_t i = ch * kRowChunk; i < std::min(n, (ch + 1) * kRowChunk); ++i) out[i] = expand(in[i]);
      });
      for (size_t i = 0; i < n; ++i) fn(out[i]);
      in.clear();
    };
    rows.for_each([&](const Row& r) {
      in.push_back(r);
      if (in.size() == kRowBatch) flush();
    });
    flush();
  }
  LatencyRow expand(const Row& r) const {
    LatencyRow row;
    row.tuple = r.tuple;
    row.from_node = r.from();
    row.to_node = r.to();
    row.scenario = kScenarios[scenario_of(r, table_)];
    row.ticks = r.ticks;
    row.ticks_lo = r.ticks_lo;
    row.ticks_hi = r.ticks_hi;
    row.from_ref = r.from_ref;
    if (have_ns_) {
      NsBound ns = to_ns_(r.ticks, r.ticks_lo, r.ticks_hi);
      row.ns = ns.ns;
      row.ns_lo = ns.lo;
      row.ns_hi = ns.hi;
    }
    return row;
  }
  mutable RunMerge<Row, RowKey<Row>> rows;  // reading may move its last runs to file
  const ScenarioTable& table() const { return table_; }

 private:
  ScenarioTable table_;
  bool have_ns_;
  TicksToNs to_ns_;
  unsigned threads_;
};

inline JoinStamp join_stamp(const TranslatedEvent& e) {
  JoinStamp s;
  s.local = e.local_ts;
  s.est = e.ref_ts, s.lo = e.ref_lo, s.hi = e.ref_hi;
  s.node = e.node;
  s.cpu = e.cpu, s.cpu_stamped = e.cpu_stamped;
  return s;
}

// The pairs of one join, bounded, added to `rows` as runs in to-event order.
// positions (when given): the trace position of each event added to the join,
// by its place among them (the join numbers only its own events).
// Join: a TupleJoin, or what has its run().
template <typename Row, typename Join>
JoinCounts append_rows(Join& join, const DurationBounds& sc, unsigned threads, MergedRows<Row>& rows_out,
                       const std::vector<uint64_t>* positions) {
  MergedRows<Row>* rows = &rows_out;
  const ScenarioTable& table = rows->table();
  // The bounds of a batch of pairs are computed on every thread, then added in
  // order.
  struct Pending {
    uint64_t tuple, seq;
    JoinStamp a, b;
  };
  std::vector<Pending> pending;
  std::vector<Row> done;
  pending.reserve(kRowBatch);
  done.resize(kRowBatch);
  auto flush = [&] {
    const size_t n = pending.size(), chunks = (n + kRowChunk - 1) / kRowChunk;
    parallel_for(threads, chunks, [&](size_t ch, unsigned) {
      for (size_t i = ch * kRowChunk; i < std::min(n, (ch + 1) * kRowChunk); ++i) {
        const Pending& p = pending[i];
        const JoinStamp &a = p.a, &b = p.b;
        const char* scenario = "";
        Bound d = sc.duration(a, b, scenario);
        done[i] =
            make_row((const Row*)nullptr, p.seq, p.tuple, d, a.est, a.node, b.node, scenario_index(scenario), table);
      }
    });
    rows->rows.add(done.data(), n);
    pending.clear();
  };
  return join.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& b) {
        pending.push_back({tuple, positions ? (*positions)[seq] : seq, a, b});
        if (pending.size() == kRowBatch) flush();
      },
      [&] {
        flush();
        rows->rows.end_run();
      });
}

// The pairs of one join, bounded and put in to-event order: res's rows, as
// Row.
template <typename Row>
void join_rows_as(TupleJoin& join, const DurationBounds& sc, LatencyResult& res) {
  const MemoryBudget& budget = res.budget;
  auto rows = std::make_shared<MergedRows<Row>>(budget.share(0.25).bytes, budget.spill_dir(), res, ScenarioTable(sc));
  JoinCounts c = append_rows(join, sc, budget.thread_count(), *rows, nullptr);
  res.take_join(c, rows);
}

// Compact rows where the positions and nodes fit them, else wide ones: the
// same rows either way.
inline void join_rows(TupleJoin& join, const DurationBounds& sc, LatencyResult& res) {
  if (join.records() < CompactRow::kMaxSeq && sc.names.size() <= CompactRow::kMaxNodes)
    join_rows_as<CompactRow>(join, sc, res);
  else
    join_rows_as<WideRow>(join, sc, res);
}

}  // namespace cptrace::latency_join
