// cptrace latency: per-tuple durations between two channels, with bounds.
#include "translate/latency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <iterator>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "cptrace.h"  // cp_channel_id
#include "translate/clock_relation.h"
#include "trace/trace_reader.h"
#include "translate/latency_summary.h"
#include "translate/sync_sanity.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"
#include "tables/tuple_join.h"
#include "tables/run_merge.h"
#include "tables/parallel_for.h"

namespace cptrace {
namespace {

using nlohmann::json;

// By full name (its hash is the id, whatever the trace kept of the name) or label.
uint64_t find_channel(const TraceReader& r, const std::string& name) {
  if (r.channels().count(cp_channel_id(name.c_str()))) return cp_channel_id(name.c_str());
  for (const auto& [id, c] : r.channels())
    if (r.channel_name(id) == name) return id;
  std::string have;
  for (const auto& [id, c] : r.channels()) have += (have.empty() ? "" : ", ") + r.channel_name(id);
  throw std::runtime_error("unknown channel \"" + name +
                           "\" (channels in the trace: " + (have.empty() ? "none" : have) + ")");
}

}  // namespace

DurationBounds DurationBounds::from_translated(const json& tr) {
  const Method method = parse_method(tr.at("method").get<std::string>(), "meta.json translated.method");
  DurationBounds d;
  std::map<std::string, size_t> index;
  for (const json& n : tr.at("nodes")) {
    index[n.at("node").get<std::string>()] = d.to_ref.size();
    d.names.push_back(n.at("node").get<std::string>());
    d.to_ref.push_back(relation_from_json(n.at("to_reference")));
    d.max_err.push_back(n.value("max_ts_err", int64_t(0)));
  }
  d.ref = index.at(tr.at("reference").get<std::string>());
  for (const json& p : tr.at("pairs")) {
    RelationPtr r = pair_relation(p, method);
    if (r) d.direct[{index.at(p.at("from").get<std::string>()), index.at(p.at("to").get<std::string>())}] = r;
  }
  return d;
}

Bound DurationBounds::duration(const DurationStamp& a, const DurationStamp& b, const char*& scenario) const {
  int64_t d = int64_t(b.local - a.local);
  if (a.node == b.node) {
    // Both stamps' own errors (a converted kernel stamp, the TSC skew across
    // CPUs): on the reference they are the instants' bounds themselves.
    scenario = a.node == ref ? "local-reference" : "local";
    int64_t e = 2 * max_err[a.node];
    return a.node == ref ? Bound{b.lo - a.hi, d, b.hi - a.lo}
                         : to_ref[a.node]->scale({d - e, d, d + e}, int64_t(a.local));
  }
  // Instant bounds are exact for the reference (lo = est = hi = local).
  Bound via{b.lo - a.hi, b.est - a.est, b.hi - a.lo};
  if (a.node == ref || b.node == ref) {
    scenario = "reference-remote";
    return via;
  }
  auto it = direct.find({a.node, b.node});
  if (it == direct.end()) {
    scenario = "remote-remote-via-reference";
    return via;
  }
  scenario = "remote-remote-direct";
  Bound g = it->second->at(int64_t(a.local));
  int64_t t = int64_t(b.local);
  Bound on_b{t - g.hi, t - g.est, t - g.lo};
  return intersect(to_ref[b.node]->scale(on_b, t), via, "remote-remote duration");
}

uint64_t latency_channel(const TraceReader& r, const std::string& name) { return find_channel(r, name); }

NsBound ticks_to_ns_long_double(int64_t ticks, int64_t lo_t, int64_t hi_t, long double hz, long double lo_hz,
                                long double hi_hz) {
  auto conv = [](int64_t t, long double f) { return (long double)t * 1e9L / f; };
  long double lo = lo_t >= 0 ? conv(lo_t, hi_hz) : conv(lo_t, lo_hz);
  long double hi = hi_t >= 0 ? conv(hi_t, lo_hz) : conv(hi_t, hi_hz);
  NsBound b;
  b.lo = int64_t(std::floor(lo - 1e-6L));
  b.hi = int64_t(std::ceil(hi + 1e-6L));
  b.ns = std::clamp(int64_t(std::llround(conv(ticks, hz))), b.lo, b.hi);
  return b;
}

namespace {

// The long double formula's three roundings (floor, ceil, llround) in double.
// The double value of t * (1e9 / f) +- 1e-6 is within 6 ulps (2^-53 relative
// each: t's conversion, the factor 1e9 / f, the product, the shift by 1e-6) of
// the long double one, itself within 2^-62 of the exact value; kSlack covers
// that with a margin of 100x, plus an absolute 1e-13 for the shift near zero.
// When the rounding of every point within the slack is the same integer, the
// long double value (which lies within it) rounds to that integer too: floor,
// ceil and round are monotone. Otherwise (a value within the slack of a
// rounding boundary, beyond 2^62, not finite, or a frequency double cannot
// hold) the caller falls back to the long double formula.
constexpr double kSlack = 1e-13;
constexpr double kLimit = 4.6e18;  // below 2^62: int64 holds every rounding

template <double (*Round)(double)>
bool rounds_alike(double v, int64_t& out) {
  const double e = std::fabs(v) * kSlack + kSlack;
  if (!(std::fabs(v) + e < kLimit)) return false;  // also NaN
  const double a = Round(v - e), b = Round(v + e);
  if (a != b) return false;
  out = int64_t(a);
  return true;
}

bool holds_double(long double f) { return (long double)(double)f == f && f > 0 && f < 1e30L; }

}  // namespace

TicksToNs::TicksToNs(long double hz, long double hz_lo, long double hz_hi)
    : hz_(hz),
      hz_lo_(hz_lo),
      hz_hi_(hz_hi),
      in_double_(holds_double(hz) && holds_double(hz_lo) && holds_double(hz_hi)),
      k_(in_double_ ? 1e9 / double(hz) : 0),
      k_lo_(in_double_ ? 1e9 / double(hz_lo) : 0),
      k_hi_(in_double_ ? 1e9 / double(hz_hi) : 0) {}

NsBound TicksToNs::operator()(int64_t ticks, int64_t lo_t, int64_t hi_t) const {
  if (in_double_) {
    const double lo = double(lo_t) * (lo_t >= 0 ? k_hi_ : k_lo_);
    const double hi = double(hi_t) * (hi_t >= 0 ? k_lo_ : k_hi_);
    NsBound b;
    int64_t ns;
    if (rounds_alike<std::floor>(lo - 1e-6, b.lo) && rounds_alike<std::ceil>(hi + 1e-6, b.hi) &&
        rounds_alike<std::round>(double(ticks) * k_, ns)) {
      b.ns = std::clamp(ns, b.lo, b.hi);
      return b;
    }
  }
  return ticks_to_ns_long_double(ticks, lo_t, hi_t, hz_, hz_lo_, hz_hi_);
}

NsBound ticks_to_ns(int64_t ticks, int64_t lo_t, int64_t hi_t, long double hz, long double lo_hz, long double hi_hz) {
  return TicksToNs(hz, lo_hz, hi_hz)(ticks, lo_t, hi_t);
}

std::string unauthenticated_warning(const std::vector<std::string>& pairs) {
  std::string list;
  for (const std::string& p : pairs) list += (list.empty() ? "" : ", ") + p;
  return "WARNING: unauthenticated MinRTT rounds (no --key): " + list +
         "; anyone on their network could have forged them, and the bounds rest on them";
}

LatencyResult latency(const std::string& dir, const std::string& from, const std::string& to) {
  TraceReader r(dir);
  if (!r.meta().contains("translated"))
    throw std::runtime_error(dir + ": not a translated trace (run cptrace translate first)");
  return latency(r, from, to);
}

namespace {

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

constexpr const char* kScenarios[] = {"local-reference", "local", "reference-remote", "remote-remote-via-reference",
                                      "remote-remote-direct"};
uint8_t scenario_index(const char* s) {
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

WideRow make_row(const WideRow*, uint64_t seq, uint64_t tuple, const Bound& d, int64_t from_ref, uint16_t a, uint16_t b,
                 uint8_t scenario, const ScenarioTable&) {
  return {seq, tuple, d.est, d.lo, d.hi, from_ref, a, b, scenario};
}
CompactRow make_row(const CompactRow*, uint64_t seq, uint64_t tuple, const Bound& d, int64_t from_ref, uint16_t a,
                    uint16_t b, uint8_t scenario, const ScenarioTable& table) {
  if (table.of(a, b) != scenario) throw std::logic_error("latency scenario not the node pair's");
  return {seq << 16 | uint64_t(a) << 8 | b, tuple, d.est, d.lo, d.hi, from_ref};
}
uint8_t scenario_of(const WideRow& r, const ScenarioTable&) { return r.scenario; }
uint8_t scenario_of(const CompactRow& r, const ScenarioTable& table) { return table.of(r.from(), r.to()); }

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

JoinStamp join_stamp(const TranslatedEvent& e) {
  JoinStamp s;
  s.local = e.local_ts;
  s.est = e.ref_ts, s.lo = e.ref_lo, s.hi = e.ref_hi;
  s.node = e.node;
  return s;
}

}  // namespace

void LatencyResult::for_each_row(const std::function<void(const LatencyRow&)>& fn) const {
  if (stream)
    stream->for_each(fn);
  else
    for (const LatencyRow& r : rows) fn(r);
}

LatencyResult latency(const TraceReader& r, const std::string& from, const std::string& to) {
  MemoryBudget unlimited;
  unlimited.bytes = ~0ull >> 1;
  LatencyResult res = latency_stream(r, from, to, unlimited);
  res.rows.reserve(res.row_count);
  res.stream->for_each([&](const LatencyRow& row) { res.rows.push_back(row); });
  res.stream.reset();
  return res;
}

namespace {

// What every result of trace `r` takes from its meta.json: the nodes, the
// method, the reference's origin and TSC frequency.
LatencyResult result_header(const TraceReader& r, const std::vector<std::string>& nodes, const MemoryBudget& budget) {
  const json& tr = r.meta()["translated"];
  LatencyResult res;
  res.budget = budget;
  res.node_names = nodes;
  res.method = tr.value("method", "");
  if (tr.contains("unauthenticated_rounds"))
    res.unauthenticated = tr["unauthenticated_rounds"].get<std::vector<std::string>>();
  for (const json& n : tr.at("nodes"))
    if (n.at("node") == tr.at("reference") && n.contains("span_tsc")) res.ref_origin = n["span_tsc"][0].get<uint64_t>();
  const json& f = tr.at("frequency");
  res.have_ns = f.contains("hz_lo");
  res.hz = f.value("hz", 0.0);
  res.hz_lo = f.value("hz_lo", 0.0);
  res.hz_hi = f.value("hz_hi", 0.0);
  return res;
}

void check_translated(const TraceReader& r) {
  if (!r.meta().contains("translated"))
    throw std::runtime_error(r.events_path() + ": not a translated trace (run cptrace translate first)");
  if (r.error()) throw *r.error();
}

// The pairs of one join, bounded, added to `rows` as runs in to-event order.
// positions (when given): the trace position of each event added to the join,
// by its place among them (the join numbers only its own events).
template <typename Row>
JoinCounts append_rows(TupleJoin& join, const DurationBounds& sc, unsigned threads, MergedRows<Row>& rows_out,
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
        Bound d = sc.duration({a.local, a.est, a.lo, a.hi, a.node}, {b.local, b.est, b.lo, b.hi, b.node}, scenario);
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
void join_rows(TupleJoin& join, const DurationBounds& sc, LatencyResult& res) {
  if (join.records() < CompactRow::kMaxSeq && sc.names.size() <= CompactRow::kMaxNodes)
    join_rows_as<CompactRow>(join, sc, res);
  else
    join_rows_as<WideRow>(join, sc, res);
}

}  // namespace

LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget) {
  return std::move(latency_streams(r, {{from, to}}, budget).front());
}

LatencyResult latency_header(const TraceReader& r) {
  check_translated(r);
  return result_header(r, DurationBounds::from_translated(r.meta()["translated"]).names, {});
}

namespace {

// An event of a channel that several pairs need, held once for all of them: in
// memory (40 bytes; its trace position is its index) while the store fits its
// share of the budget, then in 64 part files by a hash of the tuple id, so that
// each part holds every event of its ids and is joined alone.
class SharedEvents {
 public:
  static constexpr int kPartBits = 6;
  static constexpr uint16_t kWide = 0x8000;  // channel's top bit: lo/hi in the side table
  struct Held {
    uint64_t tuple, local;
    int64_t est;
    uint32_t below, above;  // or (kWide) an index into wide_
    uint16_t node, channel;
  };
  struct Spilled {
    uint64_t tuple, seq, local;
    int64_t est, lo, hi;
    uint16_t node, channel;
  };
  explicit SharedEvents(const MemoryBudget& b)
      : limit_(b.bytes),
        dir_(b.spill_dir()),
        buffer_(size_t(std::clamp<uint64_t>(b.bytes / 2 >> kPartBits, 16 << 10, 1 << 20))) {
    // Reserved once (address space; pages come as it fills): the vector never
    // doubles past the limit.
    if (b.bytes <= (64ull << 30)) {
      held_.reserve(b.bytes / sizeof(Held));
      advise_huge_pages(held_.data(), held_.capacity() * sizeof(Held));
    }
  }

  void add(uint16_t channel, uint64_t tuple, const JoinStamp& s) {
    if (parts_.empty() && held_bytes() + sizeof(Held) > limit_) spill();
    if (!parts_.empty()) return write({tuple, seq_++, s.local, s.est, s.lo, s.hi, s.node, channel});
    ++seq_;
    const uint64_t below = uint64_t(s.est) - uint64_t(s.lo), above = uint64_t(s.hi) - uint64_t(s.est);
    if (s.lo <= s.est && s.est <= s.hi && below <= UINT32_MAX && above <= UINT32_MAX) {
      held_.push_back({tuple, s.local, s.est, uint32_t(below), uint32_t(above), s.node, channel});
    } else {
      held_.push_back({tuple, s.local, s.est, uint32_t(wide_.size()), 0, s.node, uint16_t(channel | kWide)});
      wide_.push_back({s.lo, s.hi});
    }
  }
  bool spilled() const { return !parts_.empty(); }
  uint64_t size() const { return seq_; }  // events added
  // Events of `channel` in part p.
  uint64_t count(uint16_t channel, size_t p) const {
    return channel < part_count_[p].size() ? part_count_[p][channel] : 0;
  }
  size_t part_count() const { return parts_.size(); }
  // fn(channel, tuple, stamp, trace position) of each event in memory, in
  // trace order; for_each_in_part: of part p's, once spilled.
  template <typename Fn>
  void for_each_held(Fn&& fn) const {
    for (size_t i = 0; i < held_.size(); ++i) {
      const Held& h = held_[i];
      JoinStamp s{h.local, h.est, h.est - int64_t(h.below), h.est + int64_t(h.above), h.node};
      if (h.channel & kWide) s.lo = wide_[h.below].first, s.hi = wide_[h.below].second;
      fn(uint16_t(h.channel & ~kWide), h.tuple, s, i);
    }
  }
  template <typename Fn>
  void for_each_in_part(size_t p, Fn&& fn) {
    SpillFile& f = *parts_[p];
    SpillReader<Spilled> rd(f, 0, f.size(), buffer_);
    while (const Spilled* e = rd.next()) fn(e->channel, e->tuple, {e->local, e->est, e->lo, e->hi, e->node}, e->seq);
  }
  // Pending writes out, write buffers freed: the joins get the memory.
  void seal() {
    for (auto& f : parts_) f->seal();
  }

 private:
  uint64_t held_bytes() const { return held_.size() * sizeof(Held) + wide_.size() * sizeof(wide_[0]); }
  void write(const Spilled& e) {
    // Fibonacci hashing, not the join's splitmix: a part's ids still spread
    // over the join's own radix partitions.
    const size_t p = (e.tuple * 0x9E3779B97F4A7C15ull) >> (64 - kPartBits);
    parts_[p]->append(&e, sizeof e);
    if (e.channel >= part_count_[p].size()) part_count_[p].resize(e.channel + 1);
    ++part_count_[p][e.channel];
  }
  void spill() {
    for (int i = 0; i < (1 << kPartBits); ++i) parts_.push_back(std::make_unique<SpillFile>(dir_, buffer_));
    part_count_.resize(parts_.size());
    for_each_held([&](uint16_t ch, uint64_t tuple, const JoinStamp& s, uint64_t at) {
      write({tuple, at, s.local, s.est, s.lo, s.hi, s.node, ch});
    });
    std::vector<Held>().swap(held_);
    std::vector<std::pair<int64_t, int64_t>>().swap(wide_);
  }

  uint64_t limit_;
  std::string dir_;
  size_t buffer_;
  uint64_t seq_ = 0;
  std::vector<Held> held_;
  std::vector<std::pair<int64_t, int64_t>> wide_;
  std::vector<std::unique_ptr<SpillFile>> parts_;
  std::vector<std::vector<uint64_t>> part_count_;  // per part and channel
};

void add_counts(JoinCounts& sum, const JoinCounts& c) {
  sum.from_only += c.from_only, sum.to_only += c.to_only;
  sum.from_duplicates += c.from_duplicates, sum.to_duplicates += c.to_duplicates;
  sum.pairs += c.pairs;
  sum.partitions += c.partitions;
}

// How latency_streams divides its budget among the shared store, the join and
// each pair's result (its rows, then its summaries: 0.55 of its share beside
// the rows, latency_summary.h).
struct SharedSplit {
  double store, join, each_in_memory;
};
// All results kept to the end (the vector form): every pair's rows live at
// once, an equal share each, beside the store (0.3) and one join (0.22).
constexpr SharedSplit kAllKept{0.3, 0.22, 0.0};
// Each result handed on as soon as its pair is joined and dropped after: while
// the events fit in memory, one pair's rows live at a time, so they take 0.45
// (0.11 for the rows, 0.25 later for the summaries) and the store 0.4: the
// join's 0.4 and the summaries never meet. A store of 0.4 holds 2.5 M tuples
// of a three-hop path per GiB in memory.
constexpr SharedSplit kEachInTurn{0.4, 0.4, 0.45};

// The pairs of `sides` joined from the events held once for all of them, as
// Row: done(j, joined[j]) as soon as pair j's rows are complete (all at the
// end once the store spilled), its rows dropped after.
template <typename Row>
void join_shared(SharedEvents& events, const std::vector<std::pair<uint16_t, uint16_t>>& sides,
                 const DurationBounds& sc, const MemoryBudget& budget, const SharedSplit& split,
                 std::vector<LatencyResult>& joined, const std::function<void(size_t, LatencyResult&)>& done) {
  auto rows_for = [&](size_t j) {
    const MemoryBudget& each = joined[j].budget;
    return std::make_shared<MergedRows<Row>>(each.share(0.25).bytes, each.spill_dir(), joined[j], ScenarioTable(sc));
  };
  auto finish = [&](size_t j, const JoinCounts& c, std::shared_ptr<MergedRows<Row>> rows) {
    joined[j].take_join(c, std::move(rows));
    done(j, joined[j]);
    joined[j].stream.reset();
  };
  if (!events.spilled()) {
    // All in memory: one pair at a time, its rows keyed by the join's own
    // numbering of its events (in trace order, as the store's).
    for (size_t j = 0; j < sides.size(); ++j) {
      auto rows = rows_for(j);
      JoinCounts c;
      c.partitions = 0;
      {
        TupleJoin join(budget.share(split.join));
        const auto [from, to] = sides[j];
        events.for_each_held([&](uint16_t ch, uint64_t tuple, const JoinStamp& s, uint64_t) {
          // The `from` side first: a channel that is both sides is added twice.
          if (ch == from) join.add(false, tuple, s);
          if (ch == to) join.add(true, tuple, s);
        });
        add_counts(c, append_rows(join, sc, budget.thread_count(), *rows, nullptr));
      }  // the join's memory freed before its result is used
      finish(j, c, std::move(rows));
    }
    return;
  }
  // Part by part, every pair of a part together: the rows of each pair come in
  // one run per part (at least), keyed by their trace positions. Those
  // positions (8 bytes an event of the part) come out of the pair's join
  // budget.
  std::vector<std::shared_ptr<MergedRows<Row>>> rows;
  std::vector<JoinCounts> counts(sides.size());
  for (size_t j = 0; j < sides.size(); ++j) {
    rows.push_back(rows_for(j));
    counts[j].partitions = 0;
  }
  events.seal();
  const MemoryBudget part_budget = budget.share(0.22 / double(sides.size()));
  for (size_t p = 0; p < events.part_count(); ++p) {
    std::vector<std::unique_ptr<TupleJoin>> joins;
    std::vector<std::vector<uint64_t>> positions(sides.size());
    for (size_t j = 0; j < sides.size(); ++j) {
      const uint64_t n = events.count(sides[j].first, p) + events.count(sides[j].second, p);
      MemoryBudget b = part_budget;
      b.bytes -= std::min(b.bytes / 2, n * sizeof(uint64_t));
      joins.push_back(std::make_unique<TupleJoin>(b));
      positions[j].reserve(n);  // exactly
    }
    events.for_each_in_part(p, [&](uint16_t ch, uint64_t tuple, const JoinStamp& s, uint64_t at) {
      for (size_t j = 0; j < sides.size(); ++j) {
        const auto [from, to] = sides[j];
        if (ch == from) joins[j]->add(false, tuple, s), positions[j].push_back(at);
        if (ch == to) joins[j]->add(true, tuple, s), positions[j].push_back(at);
      }
    });
    for (size_t j = 0; j < sides.size(); ++j) {
      add_counts(counts[j], append_rows(*joins[j], sc, budget.thread_count(), *rows[j], &positions[j]));
      joins[j].reset();  // its memory to the next join
      std::vector<uint64_t>().swap(positions[j]);
    }
  }
  for (size_t j = 0; j < sides.size(); ++j) finish(j, counts[j], std::move(rows[j]));
}

// One pair: its join takes the events straight from the decode (`feed`). A
// little over half the budget joins, a quarter holds the rows: the summaries
// later take 0.55 beside the rows (latency_summary.h), the join gone.
LatencyResult join_one(const TraceReader& r, const DurationBounds& sc, std::pair<uint64_t, uint64_t> ids,
                       const MemoryBudget& budget, const TranslatedFeed& feed) {
  const size_t node_count = sc.names.size();
  TupleJoin join(budget.share(0.55));
  const auto [from, to] = ids;
  feed([&](const std::vector<TranslatedEvent>& evs) {
    for (const TranslatedEvent& e : evs) {
      if (e.kind != uint8_t(EventKind::User)) continue;
      if (e.node >= node_count) throw std::runtime_error("translated event names node index beyond meta.json");
      if (e.channel == from) join.add(false, e.tuple, join_stamp(e));
      if (e.channel == to) join.add(true, e.tuple, join_stamp(e));
    }
  });
  LatencyResult res = result_header(r, sc.names, budget);
  join_rows(join, sc, res);
  return res;
}

// latency_streams' work: done(i, result) for each index i of pairs, as soon as
// its pair's rows are complete; the budget divided as `split` says.
void streams(const TraceReader& r, const std::vector<ChannelPair>& pairs, const MemoryBudget& budget,
             const SharedSplit& split, const std::function<void(size_t, const LatencyResult&)>& done) {
  if (pairs.empty()) return;  // nothing to read the trace for
  check_translated(r);
  const DurationBounds sc = DurationBounds::from_translated(r.meta()["translated"]);
  // One join per distinct channel pair (a pair asked twice is read once).
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  std::vector<size_t> join_of;
  for (const auto& [from, to] : pairs) {
    std::pair<uint64_t, uint64_t> id{find_channel(r, from), find_channel(r, to)};
    auto at = std::find(ids.begin(), ids.end(), id);
    join_of.push_back(size_t(at - ids.begin()));
    if (at == ids.end()) ids.push_back(id);
  }
  // Join j's result to every index that asked for it.
  auto hand_on = [&](size_t j, const LatencyResult& res) {
    for (size_t i = 0; i < join_of.size(); ++i)
      if (join_of[i] == j) done(i, res);
  };
  const size_t node_count = sc.names.size();
  auto check_node = [&](const TranslatedEvent& e) {
    if (e.node >= node_count) throw std::runtime_error("translated event names node index beyond meta.json");
  };
  if (ids.size() == 1) {
    // One pair: its join takes the events straight from the decode.
    return hand_on(0, join_one(r, sc, ids.front(), budget,
                               [&](const TranslatedSink& fn) { for_each_translated(r, budget.thread_count(), fn); }));
  }
  // Several pairs share channels (a path's hops: each channel in two pairs).
  // Each channel's events are held once (SharedEvents, split.store of the
  // budget), not once per pair, and the pairs are joined from there: one at a
  // time in split.join while the events are in memory, else part by part, all
  // pairs of a part together in 0.22 (their events' positions included). Every
  // pair's rows hold a quarter of its result's share of the budget, as its
  // summaries later take 0.55 of that share.
  std::vector<uint64_t> channels;
  std::vector<std::pair<uint16_t, uint16_t>> sides;  // per join: the channels' indices
  auto index_of = [&](uint64_t ch) {
    auto at = std::find(channels.begin(), channels.end(), ch);
    if (at == channels.end()) channels.push_back(ch);
    if (channels.size() >= SharedEvents::kWide) throw std::runtime_error("latency: too many channels in one read");
    return uint16_t(std::find(channels.begin(), channels.end(), ch) - channels.begin());
  };
  for (const auto& [from, to] : ids) sides.push_back({index_of(from), index_of(to)});
  SharedEvents events(budget.share(split.store));
  for_each_translated(r, budget.thread_count(), [&](const std::vector<TranslatedEvent>& evs) {
    for (const TranslatedEvent& e : evs) {
      if (e.kind != uint8_t(EventKind::User)) continue;
      check_node(e);
      for (uint16_t c = 0; c < channels.size(); ++c)
        if (e.channel == channels[c]) {
          events.add(c, e.tuple, join_stamp(e));
          break;
        }
    }
  });
  // Once spilled, every pair's rows are made together: an equal share each.
  const bool in_turn = split.each_in_memory > 0 && !events.spilled();
  const MemoryBudget each = budget.share(in_turn ? split.each_in_memory : 1.0 / double(ids.size()));
  std::vector<LatencyResult> joined;
  for (size_t j = 0; j < ids.size(); ++j) joined.push_back(result_header(r, sc.names, each));
  // Compact rows where the positions and nodes fit them, else wide ones.
  if (events.size() < CompactRow::kMaxSeq && node_count <= CompactRow::kMaxNodes)
    join_shared<CompactRow>(events, sides, sc, budget, split, joined, hand_on);
  else
    join_shared<WideRow>(events, sides, sc, budget, split, joined, hand_on);
}

}  // namespace

std::vector<LatencyResult> latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs,
                                           const MemoryBudget& budget) {
  std::vector<LatencyResult> out(pairs.size());
  streams(r, pairs, budget, kAllKept, [&](size_t i, const LatencyResult& res) { out[i] = res; });
  return out;
}

LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget, const TranslatedFeed& feed) {
  check_translated(r);
  const DurationBounds sc = DurationBounds::from_translated(r.meta()["translated"]);
  const std::pair<uint64_t, uint64_t> ids{find_channel(r, from), find_channel(r, to)};
  return join_one(r, sc, ids, budget, feed);
}

void latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs, const MemoryBudget& budget,
                     const std::function<void(size_t, const LatencyResult&)>& fn) {
  streams(r, pairs, budget, kEachInTurn, fn);
}

void LatencyResult::take_join(const JoinCounts& c, std::shared_ptr<const LatencyRowSource> rows) {
  from_only = c.from_only;
  to_only = c.to_only;
  from_duplicates = c.from_duplicates;
  to_duplicates = c.to_duplicates;
  row_count = c.pairs;
  partitions = c.partitions;
  stream = std::move(rows);
}

namespace {

void summary_line(const std::string& what, const LatencyColumns& cols, const LatencyColumns::Group& g,
                  ValueColumn LatencyColumns::Leaf::*col, const char* unit) {
  uint64_t n = LatencyColumns::count(g);
  if (!n) return;
  cols.select_together(g, {{&LatencyColumns::Leaf::value, {0, 0.5, 0.9, 0.99, 1.0}},
                           {&LatencyColumns::Leaf::width, {0, 0.5, 0.9, 0.99, 1.0}}});
  std::vector<int64_t> p = cols.percentiles(g, col, {0, 0.5, 0.9, 0.99, 1.0});
  fmt::print("  {:<44} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", what, n, p[0], p[1], p[2], p[3], p[4], unit);
}

void print_summary(const LatencyResult& res, const std::string& from, const std::string& to) {
  const char* unit = res.have_ns ? "ns" : "ticks";
  fmt::print("latency {} -> {}: {} tuples\n", from, to, res.row_count);
  fmt::print("  {:<44} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "", "count", "min", "p50", "p90", "p99", "max");
  LatencyColumns cols(res);
  std::map<std::string, LatencyColumns::Group> by;
  for (const auto& l : cols.leaves()) {
    by[l->local() ? "local (same node)" : "remote (two nodes)"].push_back(l.get());
    by["  scenario " + l->scenario].push_back(l.get());
  }
  summary_line("value (all)", cols, cols.all(), &LatencyColumns::Leaf::value, unit);
  summary_line("bound width (all)", cols, cols.all(), &LatencyColumns::Leaf::width, unit);
  for (auto& [k, g] : by) {
    summary_line(k + " value", cols, g, &LatencyColumns::Leaf::value, unit);
    summary_line(k + " bound width", cols, g, &LatencyColumns::Leaf::width, unit);
  }
}

// One CSV line per row, written in large chunks.
void print_csv(const LatencyResult& res) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "tuple,from_node,to_node,scenario,ticks,ticks_lo,ticks_hi,ns,ns_lo,ns_hi\n");
  res.for_each_row([&](const LatencyRow& r) {
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{},{}\n", r.tuple, res.node_names[r.from_node],
                   res.node_names[r.to_node], r.scenario, r.ticks, r.ticks_lo, r.ticks_hi, r.ns, r.ns_lo, r.ns_hi);
    if (out.size() > (1 << 20)) {
      fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  });
  fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

// The findings translate accepted (--accept-suspect-sync): an error unless the
// user accepts them here too.
std::vector<SyncFinding> suspect_findings(const std::string& dir, bool accept) {
  return suspect_findings(TraceReader(dir), dir, accept);
}

std::vector<SyncFinding> suspect_findings(const TraceReader& r, const std::string& dir, bool accept) {
  std::vector<SyncFinding> fs;
  if (!r.meta().contains("translated")) return fs;
  for (const nlohmann::json& f : r.meta()["translated"].value("suspect_sync", nlohmann::json::array()))
    fs.push_back(SyncFinding::from_json(f));
  if (!fs.empty() && !accept)
    throw std::runtime_error(suspect_sync_error(fs, dir + " (translated with --accept-suspect-sync)"));
  return fs;
}

int cmd_latency(const std::string& dir, const std::string& from, const std::string& to, bool csv,
                bool accept_suspect_sync, bool json, const MemoryBudget& budget) {
  return cmd_latency(TraceReader(dir), dir, from, to, csv, accept_suspect_sync, json, budget);
}

int cmd_latency(const TraceReader& r, const std::string& dir, const std::string& from, const std::string& to, bool csv,
                bool accept_suspect_sync, bool json, const MemoryBudget& budget) {
  std::vector<SyncFinding> suspect = suspect_findings(r, dir, accept_suspect_sync);
  if (!r.meta().contains("translated"))
    throw std::runtime_error(dir + ": not a translated trace (run cptrace translate first)");
  return print_latency(latency_stream(r, from, to, budget), from, to, csv, json, suspect);
}

int print_latency(const LatencyResult& res, const std::string& from, const std::string& to, bool csv, bool json,
                  const std::vector<SyncFinding>& suspect) {
  const MemoryBudget& budget = res.budget;
  if (json)
    fmt::print("{}\n", latency_summary_json(res, from, to).dump(2));
  else if (csv)
    print_csv(res);
  else
    print_summary(res, from, to);
  fflush(stdout);
  if (res.partitions > 1)
    fmt::print(stderr, "note: the tuples did not fit --memory {} MiB: spilled to {} in {} partitions\n",
               budget.bytes >> 20, budget.spill_dir(), res.partitions);
  FILE* o = csv || json ? stderr : stdout;
  fmt::print(o, "unmatched: {} tuples on {} only, {} on {} only; repeated tuple ids: {} on {}, {} on {} (first used)\n",
             res.from_only, from, res.to_only, to, res.from_duplicates, from, res.to_duplicates, to);
  if (!res.have_ns) fmt::print(o, "note: reference TSC frequency unknown; durations in ticks\n");
  for (const SyncFinding& f : suspect) fmt::print(o, "{}\n", suspect_sync_warning(f));
  if (!res.unauthenticated.empty()) fmt::print(o, "{}\n", unauthenticated_warning(res.unauthenticated));
  return 0;
}

}  // namespace cptrace
