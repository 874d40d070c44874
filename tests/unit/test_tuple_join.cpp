// The tuple join (user/tables/tuple_join.h) against the obvious one hash map
// over the whole run: the same pairs in the same order, the same counts, on any
// number of threads, in memory and spilled, and over a path store's events where
// they lie; and parallel_for's contract.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "tables/parallel_for.h"
#include "latency/shared_events.h"
#include "tables/tuple_join.h"

using namespace cptrace;

namespace {

struct Event {
  bool to;
  uint64_t tuple, local;
};

struct Pair {
  uint64_t tuple, seq, from_local, to_local;
  bool operator==(const Pair&) const = default;
};

struct Joined {
  std::vector<Pair> pairs;
  JoinCounts c;
  uint64_t ends = 0;
};

// Ids from a small range (repeats on both sides, ids on one side only), stamps
// out of order so that Keep::Earliest differs from Keep::First.
std::vector<Event> events(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> ev;
  for (size_t i = 0; i < n; ++i) ev.push_back({bool(rng() & 1), rng() % (n / 2), uint64_t(i * 10) + rng() % 1000});
  return ev;
}

// One unordered_map over everything: what the join must say.
Joined reference(const std::vector<Event>& ev, TupleJoin::Keep keep) {
  struct Side {
    bool has = false;
    uint64_t seq = 0, local = 0;
  };
  std::unordered_map<uint64_t, std::pair<Side, Side>> m;
  Joined j;
  for (uint64_t seq = 0; seq < ev.size(); ++seq) {
    const Event& e = ev[seq];
    Side& s = e.to ? m[e.tuple].second : m[e.tuple].first;
    if (s.has) {
      ++(e.to ? j.c.to_duplicates : j.c.from_duplicates);
      if (keep == TupleJoin::Keep::Earliest && e.local < s.local) s.local = e.local;
      continue;
    }
    s = {true, seq, e.local};
  }
  std::vector<std::pair<uint64_t, Pair>> out;
  for (const auto& [id, sides] : m) {
    if (sides.first.has && sides.second.has)
      out.push_back({sides.second.seq, {id, sides.second.seq, sides.first.local, sides.second.local}});
    else if (sides.first.has)
      j.c.from_only++;
    else
      j.c.to_only++;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [seq, p] : out) j.pairs.push_back(p);
  j.c.pairs = j.pairs.size();
  return j;
}

Joined join(const std::vector<Event>& ev, TupleJoin::Keep keep, unsigned threads, uint64_t bytes) {
  MemoryBudget b;
  b.bytes = bytes;
  b.threads = threads;
  b.temp_dir = "/tmp";
  TupleJoin t(b, keep);
  for (const Event& e : ev) {
    JoinStamp s;
    s.local = e.local;
    t.add(e.to, e.tuple, s);
  }
  Joined j;
  std::vector<Pair> part;
  j.c = t.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& z) {
        part.push_back({tuple, seq, a.local, z.local});
      },
      [&] {
        // Each partition's pairs in to-event order; the partitions merged here.
        std::vector<Pair> merged;
        std::merge(j.pairs.begin(), j.pairs.end(), part.begin(), part.end(), std::back_inserter(merged),
                   [](const Pair& a, const Pair& z) { return a.seq < z.seq; });
        j.pairs = std::move(merged);
        part.clear();
        j.ends++;
      });
  return j;
}

void expect_same(const Joined& want, const Joined& got, const char* what) {
  EXPECT_EQ(got.c.pairs, want.c.pairs) << what;
  EXPECT_EQ(got.c.from_only, want.c.from_only) << what;
  EXPECT_EQ(got.c.to_only, want.c.to_only) << what;
  EXPECT_EQ(got.c.from_duplicates, want.c.from_duplicates) << what;
  EXPECT_EQ(got.c.to_duplicates, want.c.to_duplicates) << what;
  ASSERT_EQ(got.pairs.size(), want.pairs.size()) << what;
  EXPECT_TRUE(got.pairs == want.pairs) << what;
}

}  // namespace

TEST(TupleJoin, SamePairsAndCountsAsOneMapOnAnyThreadsInMemoryAndSpilled) {
  const std::vector<Event> ev = events(200000, 7);
  for (TupleJoin::Keep keep : {TupleJoin::Keep::First, TupleJoin::Keep::Earliest}) {
    Joined want = reference(ev, keep);
    ASSERT_GT(want.c.pairs, 10000u);
    ASSERT_GT(want.c.from_duplicates, 1000u);
    ASSERT_GT(want.c.from_only, 1000u);
    for (unsigned threads : {1u, 2u, 5u}) {
      Joined mem = join(ev, keep, threads, 1ull << 30);
      EXPECT_EQ(mem.c.partitions, 1u);
      expect_same(want, mem, "in memory");
      // 2 MB: ~20 K records in memory, so the 200 K spill into 64 partitions.
      Joined spilled = join(ev, keep, threads, 2ull << 20);
      EXPECT_GT(spilled.c.partitions, 1u);
      EXPECT_EQ(spilled.ends, spilled.c.partitions);
      expect_same(want, spilled, "spilled");
    }
  }
}

TEST(ParallelFor, EveryIndexOnceAndTheFirstErrorRethrown) {
  for (unsigned threads : {1u, 3u, 8u}) {
    std::vector<std::atomic<int>> seen(1000);
    parallel_for(threads, seen.size(), [&](size_t i, unsigned worker) {
      ASSERT_LT(worker, threads);
      seen[i]++;
    });
    for (const auto& s : seen) EXPECT_EQ(s.load(), 1);
    std::atomic<size_t> ran{0};
    EXPECT_THROW(parallel_for(threads, 1000,
                              [&](size_t i, unsigned) {
                                ran++;
                                if (i == 10) throw std::runtime_error("item 10");
                              }),
                 std::runtime_error);
    if (threads == 1) {
      EXPECT_EQ(ran.load(), 11u) << "one thread stops at the error";
    }
  }
}

// The helpers are kept between calls: 200 calls on 4 threads start at most the
// 3 helpers the widest call needs, not 3 per call.
TEST(ParallelFor, CallsReuseTheirHelperThreads) {
  parallel_for(4, 64, [](size_t, unsigned) {});
  const size_t before = helper_threads::started();
  std::atomic<size_t> items{0};
  for (int call = 0; call < 200; ++call) parallel_for(4, 64, [&](size_t, unsigned) { items++; });
  EXPECT_EQ(items.load(), 200u * 64);
  EXPECT_EQ(helper_threads::started(), before) << "no thread started after the first call";
}

// An item that runs a parallel_for of its own never waits for the outer
// call's workers, which are all busy with items like it.
TEST(ParallelFor, NestedCallsFinish) {
  std::atomic<size_t> inner{0};
  parallel_for(3, 6, [&](size_t, unsigned) { parallel_for(3, 50, [&](size_t, unsigned) { inner++; }); });
  EXPECT_EQ(inner.load(), 6u * 50);
}

// A child forked after the helpers started has none of them: its own calls
// start helpers of its own and finish.
TEST(ParallelFor, AForkedChildStartsItsOwnHelpers) {
  parallel_for(3, 30, [](size_t, unsigned) {});
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<size_t> items{0};
    parallel_for(3, 300, [&](size_t, unsigned) { items++; });
    _exit(items.load() == 300 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// A path's store (latency/shared_events.h) joins a pair where its events lie:
// the pairs and counts of the one map over that pair's events alone (a third
// channel's events between them), each pair keyed by its to-event's place in
// the store, on any number of threads.
TEST(TupleJoin, StoreJoinsAPairWhereItsEventsLie) {
  const std::vector<Event> ev = events(200000, 11);
  std::mt19937_64 rng(5);
  MemoryBudget b;
  b.bytes = 1ull << 30;
  b.temp_dir = "/tmp";
  latency_join::SharedEvents store(b);
  std::vector<Event> pair_events;  // channels 2 (from) and 0 (to), in store order
  std::vector<uint64_t> place;  // each one's index in the store
  for (uint64_t i = 0; i < ev.size(); ++i) {
    const uint16_t ch = rng() % 3 == 0 ? 1 : ev[i].to ? 0 : 2;
    JoinStamp s;
    s.local = ev[i].local;
    store.add(ch, ev[i].tuple, s);
    if (ch != 1) pair_events.push_back(ev[i]), place.push_back(i);
  }
  ASSERT_TRUE(store.joins_held(2, 0));
  Joined want = reference(pair_events, TupleJoin::Keep::First);
  for (Pair& p : want.pairs) p.seq = place[p.seq];
  ASSERT_GT(want.c.pairs, 5000u);
  for (unsigned threads : {1u, 2u, 5u}) {
    Joined got;
    got.c = store.join_held(
        2, 0, threads,
        [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& z) {
          got.pairs.push_back({tuple, seq, a.local, z.local});
        },
        [&] { got.ends++; });
    EXPECT_EQ(got.ends, 1u);
    expect_same(want, got, "held");
  }
}
