// The in-memory join of TupleJoin over records held anywhere: TupleJoin's own
// (its Block) or a store the caller already holds (latency_join::SharedEvents,
// the events of a path's channels), so that a store's events are joined where
// they lie instead of copied into a TupleJoin first (a three-hop path's report
// copied 40 bytes per event per pair, into memory the kernel then zeroed).
//
// Recs gives, for records 0..size()-1 in trace order: tuple(i); side(i), 0 for
// the from side, 1 for the to side, -1 for a record of neither (left out);
// local(i) (Keep::Earliest); partner(i), a uint32_t of scratch per record,
// kNoPartner on entry; stamp(i); seq(i), the position a pair is keyed by.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tables/memory_budget.h"
#include "tables/parallel_for.h"
#include "tables/tuple_join.h"

namespace cptrace::tuple_join_memory {

// splitmix64's finalizer: a bijection that spreads any id pattern (sequential,
// strided, scrambled) over all bits.
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
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

// The records radix-partitioned by low bits of the id's hash (the spill chose
// by the high ones), each partition small enough that its open-addressing table
// stays in the cache, and the partitions joined in parallel: a tuple id lives in
// one partition only, so they are independent. Each partition writes into the
// records' scratch (partner(), only records of its ids) which from-record the
// first to-record of an id pairs with, and which to-record the from-record
// keeps: reading the records in index order gives the pairs in to_seq order
// without a merge.
template <class Recs>
void join(Recs& recs, TupleJoin::Keep keep, unsigned threads, JoinCounts& c, const TupleJoin::PairFn& pair) {
  const uint32_t all = uint32_t(recs.size());
  // 1. Record indices grouped by partition, in record order inside each (a
  // stable counting sort: each chunk of records has its own cursors). The
  // partitions follow the records joined, not those left out.
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(threads, all / 4096 + 1));
  auto chunk_begin = [&](size_t ch) { return uint32_t(uint64_t(all) * ch / chunks); };
  std::vector<uint32_t> in_chunk(chunks);
  parallel_for(threads, chunks, [&](size_t ch, unsigned) {
    for (uint32_t i = chunk_begin(ch); i < chunk_begin(ch + 1); ++i) in_chunk[ch] += recs.side(i) >= 0;
  });
  uint32_t n = 0;
  for (uint32_t k : in_chunk) n += k;
  int bits = 0;
  while (bits < 16 && (uint64_t(n) >> bits) > kPartitionRecords) ++bits;
  const size_t parts = size_t(1) << bits;
  auto part_of = [parts](uint64_t tuple) { return size_t(mix(tuple) & (parts - 1)); };
  std::vector<uint32_t> cursor(chunks * parts);
  parallel_for(threads, chunks, [&](size_t ch, unsigned) {
    for (uint32_t i = chunk_begin(ch); i < chunk_begin(ch + 1); ++i)
      if (recs.side(i) >= 0) cursor[ch * parts + part_of(recs.tuple(i))]++;
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
      const int side = recs.side(i);
      if (side < 0) continue;
      const uint64_t tuple = recs.tuple(i);
      const uint32_t k = cursor[ch * parts + part_of(tuple)]++;
      ids[k] = tuple;
      index[k] = i | (side ? kToRef : 0);
    }
  });
  std::vector<uint32_t>().swap(cursor);

  // 2. Each partition: the first from and the first to record of each id (or
  // the earliest, keep), and the pair noted in the records' scratch.
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
        if (keep == TupleJoin::Keep::Earliest && recs.local(i) < recs.local(mine - 1)) mine = i + 1;
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
      recs.partner(i) = s.from - 1;
      recs.partner(s.from - 1) = s.to - 1;
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
  for (uint32_t i = 0; i < all; ++i) {
    if (recs.side(i) != 1 || recs.partner(i) == kNone) continue;
    const uint32_t from = recs.partner(i);
    pair(recs.tuple(i), recs.seq(i), recs.stamp(from), recs.stamp(recs.partner(from)));
  }
}

}  // namespace cptrace::tuple_join_memory
