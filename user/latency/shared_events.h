// The events of several channel pairs read once (a path's hops: each channel in
// two pairs): each channel's events held once for every pair that names it, in
// memory or in part files by tuple id, and the pairs joined from there
// (`latency_streams`, the report's path, `export table`).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "latency/latency_rows.h"
#include "tables/memory_budget.h"
#include "tables/spill_file.h"
#include "tables/tuple_join.h"
#include "tables/tuple_join_memory.h"

namespace cptrace::latency_join {

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
    uint8_t cpu1;  // TupleJoin::cpu1_of: the stamp's CPU, where known (in the padding)
  };
  struct Spilled {
    uint64_t tuple, seq, local;
    int64_t est, lo, hi;
    uint16_t node, channel, cpu;
    bool cpu_stamped;
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
    if (!parts_.empty())
      return write({tuple, seq_++, s.local, s.est, s.lo, s.hi, s.node, channel, s.cpu, s.cpu_stamped});
    ++seq_;
    if (channel >= held_count_.size()) held_count_.resize(channel + 1);
    ++held_count_[channel];
    const uint64_t below = uint64_t(s.est) - uint64_t(s.lo), above = uint64_t(s.hi) - uint64_t(s.est);
    if (s.lo <= s.est && s.est <= s.hi && below <= UINT32_MAX && above <= UINT32_MAX) {
      held_.push_back(
          {tuple, s.local, s.est, uint32_t(below), uint32_t(above), s.node, channel, TupleJoin::cpu1_of(s)});
    } else {
      held_.push_back(
          {tuple, s.local, s.est, uint32_t(wide_.size()), 0, s.node, uint16_t(channel | kWide), TupleJoin::cpu1_of(s)});
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
  // Events of `channel` held in memory (before any spill).
  uint64_t held_count(uint16_t channel) const { return channel < held_count_.size() ? held_count_[channel] : 0; }
  // fn(channel, tuple, stamp, trace position) of each event in memory, in
  // trace order; for_each_in_part: of part p's, once spilled.
  template <typename Fn>
  void for_each_held(Fn&& fn) const {
    for (size_t i = 0; i < held_.size(); ++i)
      fn(uint16_t(held_[i].channel & ~kWide), held_[i].tuple, stamp(held_[i]), i);
  }
  // Whether join_held can join pair (from, to): in memory, two channels, and
  // indices that fit the join's 31 bits.
  bool joins_held(uint16_t from, uint16_t to) const { return !spilled() && from != to && held_.size() < (1u << 31); }
  // Pair (from, to) joined from the events in memory where they lie, as
  // TupleJoin::run (Keep::First) would join copies of them added in trace
  // order: the same pairs, counts and order, keyed by trace position.
  JoinCounts join_held(uint16_t from, uint16_t to, unsigned threads, const TupleJoin::PairFn& pair,
                       const std::function<void()>& end_partition) {
    // The pair's events in trace order, from the store's per-channel lists:
    // the join touches only them.
    if (by_channel_.empty()) sort_by_channel();
    auto range = [&](uint16_t ch) {
      const uint32_t* b = by_channel_.data() + channel_begin_[ch];
      return std::pair{b, b + held_count(ch)};
    };
    const auto [fb, fe] = range(from);
    const auto [tb, te] = range(to);
    pair_.resize(size_t(fe - fb) + size_t(te - tb));
    std::merge(fb, fe, tb, te, pair_.begin());
    HeldRecs recs{*this, to};
    scratch_.assign(pair_.size(), TupleJoin::kNoPartner);
    JoinCounts c;
    tuple_join_memory::join(recs, TupleJoin::Keep::First, threads, c, pair);
    end_partition();
    return c;
  }
  template <typename Fn>
  void for_each_in_part(size_t p, Fn&& fn) {
    SpillFile& f = *parts_[p];
    SpillReader<Spilled> rd(f, 0, f.size(), buffer_);
    while (const Spilled* e = rd.next())
      fn(e->channel, e->tuple, {e->local, e->est, e->lo, e->hi, e->node, e->cpu, e->cpu_stamped}, e->seq);
  }
  // Pending writes out, write buffers freed: the joins get the memory.
  void seal() {
    for (auto& f : parts_) f->seal();
  }

 private:
  // The held events as tuple_join_memory::join reads them.
  // (The held events of one pair, pair_: each record k is held event pair_[k].)
  struct HeldRecs {
    SharedEvents& e;
    uint16_t to;
    const Held& h(uint32_t k) const { return e.held_[e.pair_[k]]; }
    size_t size() const { return e.pair_.size(); }
    uint64_t tuple(uint32_t k) const { return h(k).tuple; }
    int side(uint32_t k) const { return uint16_t(h(k).channel & ~kWide) == to ? 1 : 0; }
    uint64_t local(uint32_t k) const { return h(k).local; }
    uint32_t& partner(uint32_t k) { return e.scratch_[k]; }
    JoinStamp stamp(uint32_t k) const { return e.stamp(h(k)); }
    uint64_t seq(uint32_t k) const { return e.pair_[k]; }
  };
  // by_channel_: the held events' indices grouped by channel, in trace order
  // in each (a counting sort, once for every pair).
  void sort_by_channel() {
    channel_begin_.assign(held_count_.size() + 1, 0);
    for (size_t ch = 0; ch < held_count_.size(); ++ch) channel_begin_[ch + 1] = channel_begin_[ch] + held_count_[ch];
    std::vector<uint64_t> at(channel_begin_.begin(), channel_begin_.end() - 1);
    by_channel_.resize(held_.size());
    for (size_t i = 0; i < held_.size(); ++i) by_channel_[at[held_[i].channel & ~kWide]++] = uint32_t(i);
  }
  JoinStamp stamp(const Held& h) const {
    JoinStamp s{h.local,
                h.est,
                h.est - int64_t(h.below),
                h.est + int64_t(h.above),
                h.node,
                uint16_t(h.cpu1 ? h.cpu1 - 1 : 0),
                h.cpu1 != 0};
    if (h.channel & kWide) s.lo = wide_[h.below].first, s.hi = wide_[h.below].second;
    return s;
  }
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
  std::vector<uint64_t> held_count_;  // per channel, in memory
  // join_held's, kept for the next pair: the store's indices by channel, one
  // pair's events and their scratch.
  std::vector<uint64_t> channel_begin_;
  std::vector<uint32_t> by_channel_, pair_, scratch_;
};

inline void add_counts(JoinCounts& sum, const JoinCounts& c) {
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
    // All in memory: one pair at a time, its rows keyed by trace position
    // (joined where the events lie) or by the join's own numbering of its
    // copies (in trace order, as the store's).
    for (size_t j = 0; j < sides.size(); ++j) {
      auto rows = rows_for(j);
      JoinCounts c;
      c.partitions = 0;
      const auto [from, to] = sides[j];
      if (events.joins_held(from, to)) {
        // Joined where the events lie: no copy of them (40 bytes each into
        // memory the kernel zeroes first: a tenth of a three-hop path's CPU).
        struct Held {
          SharedEvents& e;
          uint16_t from, to;
          unsigned threads;
          JoinCounts run(const TupleJoin::PairFn& pair, const std::function<void()>& end) {
            return e.join_held(from, to, threads, pair, end);
          }
        } held{events, from, to, budget.thread_count()};
        add_counts(c, append_rows(held, sc, budget.thread_count(), *rows, nullptr));
        finish(j, c, std::move(rows));
        continue;
      }
      {
        // Reserved exactly: the next pair's join then fits where this one's
        // pages were.
        TupleJoin join(budget.share(split.join), TupleJoin::Keep::First,
                       events.held_count(from) + events.held_count(to));
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
  // Every part joined: the store's buffers and the joins are gone, and the rows
  // of all pairs hold at most a quarter of the budget together (each 0.25 of
  // its 1/n). Handed on one at a time, each pair's summaries (0.55 of its
  // result's share) may then have a share of 0.5 (0.28 of the budget) in
  // place of 1/n: fewer passes over spilled columns (a three-hop path at
  // --memory 16M took 40% more CPU with 1/n), within the same peak RSS.
  if (split.each_in_memory > 0)
    for (LatencyResult& res : joined) res.budget = budget.share(0.5);
  for (size_t j = 0; j < sides.size(); ++j) finish(j, counts[j], std::move(rows[j]));
}

}  // namespace cptrace::latency_join
