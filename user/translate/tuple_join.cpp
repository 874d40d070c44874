// The tuple-id join of `latency` in bounded memory (tuple_join.h).
#include "translate/tuple_join.h"

#include <algorithm>
#include <unordered_map>

namespace cptrace {
namespace {

constexpr uint64_t kToBit = 1ull << 63;
constexpr int kMaxLevel = 64 / TupleJoin::kFanoutBits - 1;
// Per record in memory: the record, its share of a hash table half full (two
// 16-byte slots) and of the to-event list.
constexpr uint64_t kBytesPerRecord = sizeof(TupleJoin::Rec) + 40;
// Budgets below this are real limits: the record vector is reserved at its
// full size up front (address space only; pages are touched as it fills), so it
// never doubles; above it (latency() without a budget) it grows as vectors do.
constexpr uint64_t kReserveUpTo = 64ull << 30;

// splitmix64's finalizer: a bijection that spreads any id pattern (sequential,
// strided, scrambled) over all bits.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

size_t partition_of(uint64_t tuple, int level) {
  return size_t(mix(tuple) >> (64 - TupleJoin::kFanoutBits * (level + 1))) & ((1u << TupleJoin::kFanoutBits) - 1);
}

struct Slot {
  uint64_t tuple = 0;
  uint32_t from = 0, to = 0;  // record index + 1; both 0: empty
};

}  // namespace

TupleJoin::TupleJoin(const MemoryBudget& b, Keep keep)
    : budget_(b), keep_(keep), max_in_memory_(std::clamp<uint64_t>(b.bytes / kBytesPerRecord, 1024, 1ull << 31)) {
  // The partition files' write buffers come out of the same budget: the records
  // held before the first spill take under half of it (no table yet), the
  // buffers half.
  fanout_buffer_ = size_t(std::clamp<uint64_t>(b.bytes / 2 >> kFanoutBits, 16 << 10, 1 << 20));
  if (b.bytes <= kReserveUpTo) mem_.reserve(max_in_memory_);
}

TupleJoin::~TupleJoin() = default;

void TupleJoin::add(bool to_side, uint64_t tuple, const JoinStamp& s) {
  Rec r{tuple, seq_++ | (to_side ? kToBit : 0), s};
  if (parts_.empty()) {
    mem_.push_back(r);
    if (mem_.size() >= max_in_memory_) spill_all();
    return;
  }
  parts_[partition_of(tuple, 0)]->append(&r, sizeof r);
}

void TupleJoin::spill_all() {
  for (size_t i = 0; i < (1u << kFanoutBits); ++i)
    parts_.push_back(std::make_unique<SpillFile>(budget_.spill_dir(), fanout_buffer_));
  for (const Rec& r : mem_) parts_[partition_of(r.tuple, 0)]->append(&r, sizeof r);
  std::vector<Rec>().swap(mem_);
}

JoinCounts TupleJoin::run(const PairFn& pair, const std::function<void()>& end_partition) {
  JoinCounts c;
  if (parts_.empty()) {
    join_memory(mem_, c, pair);
    std::vector<Rec>().swap(mem_);
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

// One flat open-addressing table over the partition's records: the first from
// and the first to record of each id; then the first to-records in trace order.
void TupleJoin::join_memory(std::vector<Rec>& recs, JoinCounts& c, const PairFn& pair) {
  // Exactly twice the records (no power of two: a slot is the high half of
  // hash * cap), so memory is what kBytesPerRecord says.
  const size_t cap = std::max<size_t>(16, 2 * recs.size());
  // The hash's high bits chose the partition (all equal here): the table hashes
  // the id offset by a constant, an independent bijection.
  auto home = [cap](uint64_t tuple) {
    return size_t((unsigned __int128)mix(tuple + 0x9e3779b97f4a7c15ull) * cap >> 64);
  };
  std::vector<Slot> table(cap);
  std::vector<std::pair<uint32_t, uint32_t>> firsts;  // (to record, slot)
  // Ids are random over the table: each lookup is a cache miss, so the slot of
  // the record kPrefetch ahead is fetched while this one is placed.
  constexpr uint32_t kPrefetch = 16;
  const uint32_t n = uint32_t(recs.size());
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kPrefetch < n) __builtin_prefetch(&table[home(recs[i + kPrefetch].tuple)], 1);
    size_t h = home(recs[i].tuple);
    while ((table[h].from || table[h].to) && table[h].tuple != recs[i].tuple) h = h + 1 == cap ? 0 : h + 1;
    Slot& s = table[h];
    s.tuple = recs[i].tuple;
    bool to = recs[i].seq & kToBit;
    uint32_t& mine = to ? s.to : s.from;
    if (mine) {
      ++(to ? c.to_duplicates : c.from_duplicates);
      if (keep_ == Keep::Earliest && recs[i].s.local < recs[mine - 1].s.local) mine = i + 1;
      continue;
    }
    mine = i + 1;
    if (to) firsts.push_back({i, uint32_t(h)});
  }
  for (size_t j = 0; j < firsts.size(); ++j) {
    if (j + kPrefetch < firsts.size()) {
      const Slot& ahead = table[firsts[j + kPrefetch].second];
      if (ahead.from) __builtin_prefetch(&recs[ahead.from - 1]);
    }
    if (j + 2 * kPrefetch < firsts.size()) __builtin_prefetch(&table[firsts[j + 2 * kPrefetch].second]);
    auto [i, h] = firsts[j];
    const Slot& s = table[h];
    if (!s.from) {
      c.to_only++;
      continue;
    }
    pair(recs[i].tuple, recs[i].seq & ~kToBit, recs[s.from - 1].s, recs[s.to - 1].s);
    c.pairs++;
  }
  for (const Slot& s : table)
    if (s.from && !s.to) c.from_only++;
}

void TupleJoin::join_file(SpillFile& f, int level, JoinCounts& c, const PairFn& pair,
                          const std::function<void()>& end) {
  uint64_t n = f.size() / sizeof(Rec);
  if (n == 0) return;
  c.partitions++;
  if (n <= max_in_memory_) {
    std::vector<Rec> recs(n);
    f.read(0, recs.data(), n * sizeof(Rec));
    join_memory(recs, c, pair);
    end();
    return;
  }
  SpillReader<Rec> rd(f, 0, f.size(), fanout_buffer_);
  if (level < kMaxLevel) {
    // Too big: split by the next hash bits (ids stay together).
    std::vector<std::unique_ptr<SpillFile>> sub;
    for (size_t i = 0; i < (1u << kFanoutBits); ++i)
      sub.push_back(std::make_unique<SpillFile>(budget_.spill_dir(), fanout_buffer_));
    while (const Rec* r = rd.next()) sub[partition_of(r->tuple, level + 1)]->append(r, sizeof *r);
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
    Rec from{}, to{};
    bool has_from = false, has_to = false;
  };
  std::unordered_map<uint64_t, Firsts> first;
  while (const Rec* r = rd.next()) {
    Firsts& f = first[r->tuple];
    bool to = r->seq & kToBit;
    bool& has = to ? f.has_to : f.has_from;
    Rec& kept = to ? f.to : f.from;
    if (has) {
      ++(to ? c.to_duplicates : c.from_duplicates);
      if (keep_ == Keep::Earliest && r->s.local < kept.s.local) {
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
    pair(f.to.tuple, f.to.seq & ~kToBit, f.from.s, f.to.s);
    c.pairs++;
  }
  end();
}

}  // namespace cptrace
