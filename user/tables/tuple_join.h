// The join under every latency: each tuple id's first event on the `from`
// channel with its first event on the `to` channel, in any amount of data.
//
// Events are added in trace order (their sequence number is their position).
// While they fit half the memory budget they stay in memory, 40 bytes each (id,
// local stamp, instant and its bound as two 32-bit widths, node; the position is
// the index), and are joined radix-partitioned; beyond it they are partitioned
// by a hash of the tuple id
// into kFanout unnamed spill files (a partition that still does not fit is split
// again with the next hash bits), and each partition is joined alone. Inside a
// partition events keep trace order, so its pairs come out in to-event order;
// the caller merges the partitions' pairs by to_seq (RunMerge). Which event is
// "first" and what counts as repeated or unmatched is exactly what one hash map
// over the whole run would say: a tuple id lives in one partition only.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tables/memory_budget.h"
#include "tables/spill_file.h"

namespace cptrace {

// What the join carries of an event (the caller's meaning).
struct JoinStamp {
  uint64_t local = 0;
  int64_t est = 0, lo = 0, hi = 0;
  uint16_t node = 0;
  // The CPU whose TSC `local` was read on, where known (cpu_stamped): two
  // stamps of one CPU differ by no cross-CPU skew. In memory the join keeps
  // CPUs below 255 (kStampCpus); a stamp of another CPU loses only that.
  uint16_t cpu = 0;
  bool cpu_stamped = false;
};
// Both stamps read on one CPU's TSC: their difference carries no skew term.
inline bool one_cpu(const JoinStamp& a, const JoinStamp& b) { return a.cpu_stamped && b.cpu_stamped && a.cpu == b.cpu; }

struct JoinCounts {
  uint64_t from_only = 0, to_only = 0;  // tuple ids seen on one side only
  uint64_t from_duplicates = 0, to_duplicates = 0;  // repeated ids (first one used)
  uint64_t pairs = 0;
  uint64_t partitions = 1;  // > 1: the events were spilled
};

class TupleJoin {
 public:
  static constexpr int kFanoutBits = 6;
  // Which event of an id stands for its side: the first in trace order
  // (translated latency), or the one with the smallest JoinStamp::local (one
  // node's trace, whose file order is only roughly time order). Either way the
  // pairs come in the order of each id's first to-event.
  enum class Keep { First, Earliest };
  // `expected`: the records the caller will add, where it knows (a store
  // that counted them): reserved exactly rather than the budget's worth.
  explicit TupleJoin(const MemoryBudget& b, Keep keep = Keep::First, uint64_t expected = UINT64_MAX);
  ~TupleJoin();

  // One event of the `from` (to_side false) or `to` channel, in trace order. An
  // event of a channel that is both is added twice, once per side.
  void add(bool to_side, uint64_t tuple, const JoinStamp& s) {
    // Inlined: the common case, one record more in memory, costs a store.
    if (parts_.empty() && mem_.recs.size() + 1 < max_in_memory_) {
      ++seq_;
      mem_.push(to_side, tuple, s);
      return;
    }
    add_beyond_memory(to_side, tuple, s);
  }

  // Records added so far (both sides): every to_seq is below it.
  uint64_t records() const { return seq_; }

  // pair(tuple, to_seq, from, to) for every tuple seen on both sides, in to_seq
  // order inside each partition; end_partition() after each partition.
  using PairFn = std::function<void(uint64_t tuple, uint64_t to_seq, const JoinStamp& from, const JoinStamp& to)>;
  JoinCounts run(const PairFn& pair, const std::function<void()>& end_partition);

  static constexpr uint8_t kTo = 1, kWide = 2;  // Rec::flags
  static constexpr uint32_t kNoPartner = ~0u;
  // An event as the join holds it in memory: 40 bytes. Its trace position is
  // its index (or, read back from a partition file, a column beside it); lo and
  // hi are widths below and above est, or (kWide) an index into a side table
  // when they do not fit 32 bits.
  struct Rec {
    uint64_t tuple;
    uint64_t local;
    int64_t est;
    uint32_t below, above;
    uint32_t partner;  // the join's scratch: a to-record's from-record, a from-record's kept to-record
    uint16_t node;
    uint8_t flags;  // kTo, kWide
    uint8_t cpu1;  // 1 + JoinStamp::cpu where cpu_stamped and below kStampCpus, else 0
  };
  static constexpr uint16_t kStampCpus = 255;
  static uint8_t cpu1_of(const JoinStamp& s) { return s.cpu_stamped && s.cpu < kStampCpus ? uint8_t(s.cpu + 1) : 0; }
  // As written to a partition file: the whole stamp and the position.
  struct SpilledRec {
    uint64_t tuple;
    uint64_t seq;  // top bit: to side
    uint64_t local;
    int64_t est, lo, hi;
    uint16_t node;
    uint16_t cpu;
    bool cpu_stamped;
  };
  // Records of one in-memory join: the records, their positions (empty: the
  // index), and the bounds too wide for a record.
  struct Block {
    std::vector<Rec> recs;
    std::vector<uint64_t> seqs;
    std::vector<std::pair<int64_t, int64_t>> wide;
    void push(bool to_side, uint64_t tuple, const JoinStamp& s) {
      // Both widths in 32 bits (the bound of a converted stamp is microseconds);
      // anything else (no bound, an unsynchronised node) goes to the side table.
      const uint64_t below = uint64_t(s.est) - uint64_t(s.lo), above = uint64_t(s.hi) - uint64_t(s.est);
      if (s.lo <= s.est && s.est <= s.hi && below <= UINT32_MAX && above <= UINT32_MAX)
        recs.push_back({tuple, s.local, s.est, uint32_t(below), uint32_t(above), kNoPartner, s.node,
                        uint8_t(to_side ? kTo : 0), cpu1_of(s)});
      else
        push_wide(to_side, tuple, s);
    }
    void push_wide(bool to_side, uint64_t tuple, const JoinStamp& s);
    JoinStamp stamp(const Rec& r) const;
  };

 private:
  void add_beyond_memory(bool to_side, uint64_t tuple, const JoinStamp& s);
  void spill_all();
  void join_memory(Block& b, JoinCounts& c, const PairFn& pair);
  void join_file(SpillFile& f, int level, JoinCounts& c, const PairFn& pair, const std::function<void()>& end);

  MemoryBudget budget_;
  Keep keep_;
  uint64_t max_in_memory_;  // records
  uint64_t max_from_file_;  // records of a partition read back (with their positions)
  size_t fanout_buffer_;  // write buffer of each partition file (out of the budget)
  uint64_t seq_ = 0;
  Block mem_;
  std::vector<std::unique_ptr<SpillFile>> parts_;  // empty: all in memory
};

}  // namespace cptrace
