// The tuple-id join of `latency` in bounded memory (tuple_join.h).
#include "tables/tuple_join.h"

#include <algorithm>
#include <unordered_map>

#include "tables/tuple_join_memory.h"

namespace cptrace {
namespace {

constexpr uint64_t kToBit = 1ull << 63;
constexpr int kMaxLevel = 64 / TupleJoin::kFanoutBits - 1;
constexpr uint8_t kTo = TupleJoin::kTo, kWide = TupleJoin::kWide;
// Per record in memory: the record and its id and index in the partitioned
// order (12 bytes). The partitions' tables and first-to lists are per thread and
// follow a partition's distinct ids (a few hundred KiB): the last 4 bytes.
// Read back from a partition file, its position (8) comes on top.
constexpr uint64_t kBytesPerRecord = sizeof(TupleJoin::Rec) + 12 + 4;
constexpr uint64_t kBytesPerFileRecord = kBytesPerRecord + 8;
static_assert(sizeof(TupleJoin::Rec) == 40);
// Budgets below this are real limits: the record vector is reserved at its
// full size up front (address space only; pages are touched as it fills), so it
// never doubles; above it (latency() without a budget) it grows as vectors do.
constexpr uint64_t kReserveUpTo = 64ull << 30;

using tuple_join_memory::mix;

size_t partition_of(uint64_t tuple, int level) {
  return size_t(mix(tuple) >> (64 - TupleJoin::kFanoutBits * (level + 1))) & ((1u << TupleJoin::kFanoutBits) - 1);
}

TupleJoin::SpilledRec spilled(const TupleJoin::Block& b, size_t i, uint64_t seq) {
  const TupleJoin::Rec& r = b.recs[i];
  JoinStamp s = b.stamp(r);
  return {r.tuple, seq | (r.flags & kTo ? kToBit : 0), s.local, s.est, s.lo, s.hi, s.node, s.cpu, s.cpu_stamped};
}

JoinStamp stamp_of(const TupleJoin::SpilledRec& r) {
  return {r.local, r.est, r.lo, r.hi, r.node, r.cpu, r.cpu_stamped};
}

}  // namespace

void TupleJoin::Block::push_wide(bool to_side, uint64_t tuple, const JoinStamp& s) {
  recs.push_back({tuple, s.local, s.est, uint32_t(wide.size()), 0, kNoPartner, s.node,
                  uint8_t((to_side ? kTo : 0) | kWide), cpu1_of(s)});
  wide.push_back({s.lo, s.hi});
}

JoinStamp TupleJoin::Block::stamp(const Rec& r) const {
  const uint16_t cpu = r.cpu1 ? uint16_t(r.cpu1 - 1) : 0;
  if (r.flags & kWide) return {r.local, r.est, wide[r.below].first, wide[r.below].second, r.node, cpu, r.cpu1 != 0};
  return {r.local, r.est, r.est - int64_t(r.below), r.est + int64_t(r.above), r.node, cpu, r.cpu1 != 0};
}

TupleJoin::TupleJoin(const MemoryBudget& b, Keep keep, uint64_t expected)
    : budget_(b),
      keep_(keep),
      max_in_memory_(std::clamp<uint64_t>(b.bytes / kBytesPerRecord, 1024, 1ull << 31)),
      max_from_file_(std::clamp<uint64_t>(b.bytes / kBytesPerFileRecord, 1024, 1ull << 31)) {
  // The partition files' write buffers come out of the same budget: the records
  // held before the first spill take under half of it (no table yet), the
  // buffers half.
  fanout_buffer_ = size_t(std::clamp<uint64_t>(b.bytes / 2 >> kFanoutBits, 16 << 10, 1 << 20));
  if (b.bytes <= kReserveUpTo || expected < max_in_memory_) {
    const uint64_t n = std::min(max_in_memory_, expected);
    mem_.recs.reserve(n);
    advise_huge_pages(mem_.recs.data(), n * sizeof(Rec));
  }
}

TupleJoin::~TupleJoin() = default;

void TupleJoin::add_beyond_memory(bool to_side, uint64_t tuple, const JoinStamp& s) {
  if (parts_.empty()) {
    ++seq_;
    mem_.push(to_side, tuple, s);
    spill_all();
    return;
  }
  SpilledRec r{tuple, seq_++ | (to_side ? kToBit : 0), s.local, s.est, s.lo, s.hi, s.node, s.cpu, s.cpu_stamped};
  parts_[partition_of(tuple, 0)]->append(&r, sizeof r);
}

void TupleJoin::spill_all() {
  for (size_t i = 0; i < (1u << kFanoutBits); ++i)
    parts_.push_back(std::make_unique<SpillFile>(budget_.spill_dir(), fanout_buffer_));
  for (size_t i = 0; i < mem_.recs.size(); ++i) {
    SpilledRec r = spilled(mem_, i, i);
    parts_[partition_of(r.tuple, 0)]->append(&r, sizeof r);
  }
  mem_ = Block();
}

JoinCounts TupleJoin::run(const PairFn& pair, const std::function<void()>& end_partition) {
  JoinCounts c;
  if (parts_.empty()) {
    join_memory(mem_, c, pair);
    mem_ = Block();
    end_partition();
    return c;
  }
  c.partitions = 0;
  for (auto& p : parts_) p->seal();  // the buffers' memory is the partitions' now
  for (auto& p : parts_) {
    join_file(*p, 0, c, pair, end_partition);
    p.reset();  // its space goes back now
  }
  return c;
}

namespace {

// TupleJoin's own records, as tuple_join_memory::join reads them: the scratch
// is Rec::partner, the position the index or the file's column beside it.
struct BlockRecs {
  TupleJoin::Block& b;
  size_t size() const { return b.recs.size(); }
  uint64_t tuple(uint32_t i) const { return b.recs[i].tuple; }
  int side(uint32_t i) const { return b.recs[i].flags & kTo ? 1 : 0; }
  uint64_t local(uint32_t i) const { return b.recs[i].local; }
  uint32_t& partner(uint32_t i) { return b.recs[i].partner; }
  JoinStamp stamp(uint32_t i) const { return b.stamp(b.recs[i]); }
  uint64_t seq(uint32_t i) const { return b.seqs.empty() ? i : b.seqs[i]; }
};

}  // namespace

void TupleJoin::join_memory(Block& b, JoinCounts& c, const PairFn& pair) {
  BlockRecs recs{b};
  tuple_join_memory::join(recs, keep_, budget_.thread_count(), c, pair);
}

void TupleJoin::join_file(SpillFile& f, int level, JoinCounts& c, const PairFn& pair,
                          const std::function<void()>& end) {
  uint64_t n = f.size() / sizeof(SpilledRec);
  if (n == 0) return;
  c.partitions++;
  SpillReader<SpilledRec> rd(f, 0, f.size(), fanout_buffer_);
  if (n <= max_from_file_) {
    Block b;
    b.recs.reserve(n);
    b.seqs.reserve(n);
    while (const SpilledRec* r = rd.next()) {
      b.push(r->seq & kToBit, r->tuple, stamp_of(*r));
      b.seqs.push_back(r->seq & ~kToBit);
    }
    join_memory(b, c, pair);
    end();
    return;
  }
  if (level < kMaxLevel) {
    // Too big: split by the next hash bits (ids stay together).
    std::vector<std::unique_ptr<SpillFile>> sub;
    for (size_t i = 0; i < (1u << kFanoutBits); ++i)
      sub.push_back(std::make_unique<SpillFile>(budget_.spill_dir(), fanout_buffer_));
    while (const SpilledRec* r = rd.next()) sub[partition_of(r->tuple, level + 1)]->append(r, sizeof *r);
    for (auto& s : sub) s->seal();
    c.partitions--;
    for (auto& s : sub) {
      join_file(*s, level + 1, c, pair, end);
      s.reset();
    }
    return;
  }
  // Every hash bit used and still too big: few ids repeated very often. Memory
  // then follows the distinct ids, not the records.
  struct Firsts {
    SpilledRec from{}, to{};
    bool has_from = false, has_to = false;
  };
  std::unordered_map<uint64_t, Firsts> first;
  while (const SpilledRec* r = rd.next()) {
    Firsts& f = first[r->tuple];
    bool to = r->seq & kToBit;
    bool& has = to ? f.has_to : f.has_from;
    SpilledRec& kept = to ? f.to : f.from;
    if (has) {
      ++(to ? c.to_duplicates : c.from_duplicates);
      if (keep_ == Keep::Earliest && r->local < kept.local) {
        uint64_t first_seq = kept.seq;  // the order stays the first to-event's
        kept = *r;
        kept.seq = first_seq;
      }
      continue;
    }
    has = true;
    kept = *r;
  }
  std::vector<Firsts> out;
  for (auto& [id, f] : first) {
    if (!f.has_to)
      c.from_only++;
    else if (!f.has_from)
      c.to_only++;
    else
      out.push_back(f);
  }
  std::sort(out.begin(), out.end(), [](const Firsts& a, const Firsts& b) { return a.to.seq < b.to.seq; });
  for (const Firsts& f : out) {
    pair(f.to.tuple, f.to.seq & ~kToBit, stamp_of(f.from), stamp_of(f.to));
    c.pairs++;
  }
  end();
}

}  // namespace cptrace
