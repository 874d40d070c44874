// The tuple-id join of `latency` in bounded memory (tuple_join.h).
#include "tables/tuple_join.h"

#include <algorithm>
#include <unordered_map>

#include "tables/parallel_for.h"

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
constexpr uint32_t kNone = TupleJoin::kNoPartner;
constexpr uint32_t kToRef = 1u << 31;  // the to side, in a record index (below 2^31)

struct Slot {
  uint64_t tuple = 0;
  uint32_t from = 0, to = 0;  // record index + 1; both 0: empty
};

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

// The records radix-partitioned by low bits of the id's hash (the spill chose
// by the high ones), each partition small enough that its open-addressing table
// stays in the cache, and the partitions joined in parallel: a tuple id lives in
// one partition only, so they are independent. Each partition writes into the
// records themselves (Rec::partner, only records of its ids) which from-record
// the first to-record of an id pairs with, and which to-record the from-record
// keeps: reading the records in index order gives the pairs in to_seq order
// without a merge.
void TupleJoin::join_memory(Block& b, JoinCounts& c, const PairFn& pair) {
  std::vector<Rec>& recs = b.recs;
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
  // The id goes along: the partition's pass then reads these arrays in order
  // instead of the records at random.
  // Left uninitialised (every slot is written below): advised before their
  // first touch, they fault in 2 MiB pages.
  std::unique_ptr<uint64_t[]> ids(new uint64_t[n]);
  std::unique_ptr<uint32_t[]> index(new uint32_t[n]);  // top bit: to side
  advise_huge_pages(ids.get(), n * sizeof(uint64_t));
  advise_huge_pages(index.get(), n * sizeof(uint32_t));
  parallel_for(threads, chunks, [&](size_t ch, unsigned) {
    for (uint32_t i = chunk_begin(ch); i < chunk_begin(ch + 1); ++i) {
      const Rec& r = recs[i];
      const uint32_t k = cursor[ch * parts + part_of(r.tuple)]++;
      ids[k] = r.tuple;
      index[k] = i | (r.flags & kTo ? kToRef : 0);
    }
  });
  std::vector<uint32_t>().swap(cursor);

  // 2. Each partition: the first from and the first to record of each id (or
  // the earliest, keep_), and the pair noted in the records.
  struct Worker {
    std::vector<Slot> table;
    std::vector<std::pair<uint32_t, uint32_t>> firsts;  // (first to record, slot)
    JoinCounts c;
  };
  std::vector<Worker> workers(std::min<size_t>(threads, parts));
  parallel_for(threads, parts, [&](size_t p, unsigned w) {
    Worker& wk = workers[w];
    const uint64_t* pid = ids.get() + part_begin[p];
    const uint32_t* pix = index.get() + part_begin[p];
    const uint32_t m = part_begin[p + 1] - part_begin[p];
    // Twice the distinct ids, no power of two (a slot is the high half of hash *
    // cap). A partition of few ids repeated often starts smaller and grows.
    size_t cap = std::max<size_t>(16, 2 * std::min<size_t>(m, 1 << 17)), used = 0;
    auto home = [&cap](uint64_t tuple) {
      return size_t((unsigned __int128)mix(tuple + 0x9e3779b97f4a7c15ull) * cap >> 64);
    };
    auto find = [&](const std::vector<Slot>& t, uint64_t tuple) {
      size_t h = home(tuple);
      while ((t[h].from || t[h].to) && t[h].tuple != tuple) h = h + 1 == cap ? 0 : h + 1;
      return h;
    };
    wk.table.assign(cap, Slot{});
    wk.firsts.clear();
    uint64_t from_ids = 0, paired = 0;  // this partition's
    for (uint32_t j = 0; j < m; ++j) {
      const uint64_t tuple = pid[j];
      const uint32_t i = pix[j] & ~kToRef;
      size_t h = find(wk.table, tuple);
      if (!wk.table[h].from && !wk.table[h].to && ++used * 2 > cap) {
        std::vector<Slot> old;
        old.swap(wk.table);
        cap *= 2;
        wk.table.assign(cap, Slot{});
        for (const Slot& s : old)
          if (s.from || s.to) wk.table[find(wk.table, s.tuple)] = s;
        for (auto& f : wk.firsts) f.second = uint32_t(find(wk.table, old[f.second].tuple));
        h = find(wk.table, tuple);
      }
      Slot& s = wk.table[h];
      s.tuple = tuple;
      bool to = pix[j] & kToRef;
      uint32_t& mine = to ? s.to : s.from;
      if (mine) {
        ++(to ? wk.c.to_duplicates : wk.c.from_duplicates);
        if (keep_ == Keep::Earliest && recs[i].local < recs[mine - 1].local) mine = i + 1;
        continue;
      }
      mine = i + 1;
      if (to)
        wk.firsts.push_back({i, uint32_t(h)});
      else
        ++from_ids;
    }
    for (auto [i, h] : wk.firsts) {
      const Slot& s = wk.table[h];
      if (!s.from) {
        wk.c.to_only++;
        continue;
      }
      recs[i].partner = s.from - 1;
      recs[s.from - 1].partner = s.to - 1;
      ++paired;
    }
    wk.c.pairs += paired;
    // Ids with a from-record and no to-record: those with one, less the paired
    // (no pass over the table).
    wk.c.from_only += from_ids - paired;
  });
  ids.reset();
  index.reset();
  for (Worker& wk : workers) {
    c.from_only += wk.c.from_only;
    c.to_only += wk.c.to_only;
    c.from_duplicates += wk.c.from_duplicates;
    c.to_duplicates += wk.c.to_duplicates;
    c.pairs += wk.c.pairs;
  }

  // 3. The pairs in order of their first to-record.
  for (uint32_t i = 0; i < n; ++i) {
    const Rec& r = recs[i];
    if (!(r.flags & kTo) || r.partner == kNone) continue;
    const Rec& from = recs[r.partner];
    pair(r.tuple, b.seqs.empty() ? i : b.seqs[i], b.stamp(from), b.stamp(recs[from.partner]));
  }
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
