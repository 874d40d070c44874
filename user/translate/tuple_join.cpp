// The tuple-id join of `latency` in bounded memory (tuple_join.h).
#include "translate/tuple_join.h"

#include <algorithm>
#include <unordered_map>

#include "translate/parallel_for.h"

namespace cptrace {
namespace {

constexpr uint64_t kToBit = 1ull << 63;
constexpr int kMaxLevel = 64 / TupleJoin::kFanoutBits - 1;
// Per record in memory: the record, its id and index in the partitioned order
// (16 bytes), its pair slot (8), and the tables of the partitions being joined
// (two 16-byte slots per record, at most a partition per thread: the rest of
// the 40 when one partition holds most records, as a few ids repeated).
constexpr uint64_t kBytesPerRecord = sizeof(TupleJoin::Rec) + 40;
static_assert(sizeof(TupleJoin::Rec) + 16 + 8 <= kBytesPerRecord);
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

// Records per partition of the in-memory join: its table (two 16-byte slots a
// record) is 256 KiB, within a core's L2 cache.
constexpr uint64_t kPartitionRecords = 8192;
constexpr uint32_t kNone = ~0u;
constexpr uint32_t kToRef = 1u << 31;  // the to side, in a record index (below 2^31)

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
  if (b.bytes <= kReserveUpTo) {
    mem_.reserve(max_in_memory_);
    advise_huge_pages(mem_.data(), max_in_memory_ * sizeof(Rec));
  }
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

// The records radix-partitioned by low bits of the id's hash (the spill chose
// by the high ones), each partition small enough that its open-addressing table
// stays in the cache, and the partitions joined in parallel: a tuple id lives in
// one partition only, so they are independent. Each partition writes the pair of
// its first to-record into `match`, indexed by that record: reading `match` in
// index order gives the pairs in to_seq order without a merge.
void TupleJoin::join_memory(std::vector<Rec>& recs, JoinCounts& c, const PairFn& pair) {
  const uint32_t n = uint32_t(recs.size());
  const unsigned threads = budget_.thread_count();
  int bits = 0;
  while (bits < 16 && (uint64_t(n) >> bits) > kPartitionRecords) ++bits;
  const size_t parts = size_t(1) << bits;
  auto part_of = [parts](uint64_t tuple) { return size_t(mix(tuple) & (parts - 1)); };

  // 1. Record indices grouped by partition, in record order inside each (a
  // stable counting sort: each chunk of records has its own cursors).
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(threads, n / 4096 + 1));
  auto chunk_begin = [&](size_t ch) { return uint32_t(uint64_t(n) * ch / chunks); };
  std::vector<uint32_t> cursor(chunks * parts);
  parallel_for(threads, chunks, [&](size_t ch, unsigned) {
    for (uint32_t i = chunk_begin(ch); i < chunk_begin(ch + 1); ++i) cursor[ch * parts + part_of(recs[i].tuple)]++;
  });
  std::vector<uint32_t> part_begin(parts + 1);
  uint32_t at = 0;
  for (size_t p = 0; p < parts; ++p) {
    part_begin[p] = at;
    for (size_t ch = 0; ch < chunks; ++ch) std::swap(cursor[ch * parts + p], at), at += cursor[ch * parts + p];
  }
  part_begin[parts] = n;
  // The id goes along: the partition's pass then reads this array in order
  // instead of the records at random.
  struct Ref {
    uint64_t tuple;
    uint32_t index;  // top bit: to side
  };
  std::vector<Ref> order(n);
  advise_huge_pages(order.data(), n * sizeof(Ref));
  parallel_for(threads, chunks, [&](size_t ch, unsigned) {
    for (uint32_t i = chunk_begin(ch); i < chunk_begin(ch + 1); ++i) {
      const Rec& r = recs[i];
      order[cursor[ch * parts + part_of(r.tuple)]++] = {r.tuple, i | (r.seq & kToBit ? kToRef : 0)};
    }
  });
  std::vector<uint32_t>().swap(cursor);

  // 2. Each partition: the first from and the first to record of each id (or
  // the earliest, keep_), and the pair at its first to-record's index.
  struct Match {
    uint32_t from = kNone, to = kNone;  // the records paired (from == kNone: none)
  };
  std::vector<Match> match;
  match.reserve(n);
  advise_huge_pages(match.data(), n * sizeof(Match));
  match.resize(n);
  struct Worker {
    std::vector<Slot> table;
    std::vector<std::pair<uint32_t, uint32_t>> firsts;  // (first to record, slot)
    JoinCounts c;
  };
  std::vector<Worker> workers(std::min<size_t>(threads, parts));
  parallel_for(threads, parts, [&](size_t p, unsigned w) {
    Worker& wk = workers[w];
    const Ref* refs = order.data() + part_begin[p];
    const uint32_t m = part_begin[p + 1] - part_begin[p];
    // Twice the records, no power of two (a slot is the high half of hash * cap).
    const size_t cap = std::max<size_t>(16, 2 * size_t(m));
    auto home = [cap](uint64_t tuple) {
      return size_t((unsigned __int128)mix(tuple + 0x9e3779b97f4a7c15ull) * cap >> 64);
    };
    wk.table.assign(cap, Slot{});
    wk.firsts.clear();
    for (uint32_t j = 0; j < m; ++j) {
      const uint64_t tuple = refs[j].tuple;
      const uint32_t i = refs[j].index & ~kToRef;
      size_t h = home(tuple);
      while ((wk.table[h].from || wk.table[h].to) && wk.table[h].tuple != tuple) h = h + 1 == cap ? 0 : h + 1;
      Slot& s = wk.table[h];
      s.tuple = tuple;
      bool to = refs[j].index & kToRef;
      uint32_t& mine = to ? s.to : s.from;
      if (mine) {
        ++(to ? wk.c.to_duplicates : wk.c.from_duplicates);
        if (keep_ == Keep::Earliest && recs[i].s.local < recs[mine - 1].s.local) mine = i + 1;
        continue;
      }
      mine = i + 1;
      if (to) wk.firsts.push_back({i, uint32_t(h)});
    }
    for (auto [i, h] : wk.firsts) {
      const Slot& s = wk.table[h];
      if (!s.from) {
        wk.c.to_only++;
        continue;
      }
      match[i] = {s.from - 1, s.to - 1};
      wk.c.pairs++;
    }
    for (const Slot& s : wk.table)
      if (s.from && !s.to) wk.c.from_only++;
  });
  std::vector<Ref>().swap(order);
  for (Worker& wk : workers) {
    c.from_only += wk.c.from_only;
    c.to_only += wk.c.to_only;
    c.from_duplicates += wk.c.from_duplicates;
    c.to_duplicates += wk.c.to_duplicates;
    c.pairs += wk.c.pairs;
  }

  // 3. The pairs in order of their first to-record.
  for (uint32_t i = 0; i < n; ++i) {
    const Match& mt = match[i];
    if (mt.from == kNone) continue;
    pair(recs[i].tuple, recs[i].seq & ~kToBit, recs[mt.from].s, recs[mt.to].s);
  }
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
