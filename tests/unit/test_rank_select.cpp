// select_ranks against a full sort: in memory and by narrowing passes, few
// ranks and a CDF's hundreds, in any order and repeated, over columns of
// values with many ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "tables/rank_select.h"

using namespace cptrace;

namespace {

struct Columns {
  MemoryPool pool;
  std::vector<std::unique_ptr<ValueColumn>> cols;
  std::vector<int64_t> sorted;
  Columns(size_t count, size_t n, uint64_t seed) : pool{1 << 30, 0} {
    std::mt19937_64 rng(seed);
    for (size_t c = 0; c < count; ++c) cols.push_back(std::make_unique<ValueColumn>(pool, ::testing::TempDir()));
    for (size_t i = 0; i < n; ++i) {
      // Ties (a small range) beside wide values of both signs.
      int64_t v = i % 3 ? int64_t(rng() % 50) : int64_t(rng()) >> (rng() % 40);
      cols[i % count]->add(v);
      sorted.push_back(v);
    }
    std::sort(sorted.begin(), sorted.end());
  }
  std::vector<const ValueColumn*> view() const {
    std::vector<const ValueColumn*> v;
    for (const auto& c : cols) v.push_back(c.get());
    return v;
  }
};

// Ranks in a scrambled order, some twice, the first and last included.
std::vector<uint64_t> ranks(size_t n, size_t m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> ks{0, n - 1};
  while (ks.size() < m) ks.push_back(rng() % n);
  for (size_t i = 0; i < m / 4; ++i) ks.push_back(ks[rng() % ks.size()]);
  std::shuffle(ks.begin(), ks.end(), rng);
  return ks;
}

}  // namespace

TEST(RankSelect, EveryRankEqualsTheSortedValueInMemoryAndNarrowed) {
  const size_t n = 200000;
  Columns c(3, n, 7);
  for (size_t m : {1, 2, 5, 17, 405}) {
    const std::vector<uint64_t> ks = ranks(n, m, m);
    // All in memory, then with room for a tenth of the values (narrowing passes).
    for (uint64_t mem : {uint64_t(64) << 20, uint64_t(n / 10 * sizeof(int64_t))}) {
      std::vector<int64_t> got = select_ranks(c.view(), ks, mem);
      ASSERT_EQ(got.size(), ks.size());
      for (size_t i = 0; i < ks.size(); ++i)
        ASSERT_EQ(got[i], c.sorted[ks[i]]) << "rank " << ks[i] << " of " << m << " ranks, memory " << mem;
    }
  }
}

TEST(RankSelect, EveryRankOfASmallColumn) {
  Columns c(1, 300, 11);
  std::vector<uint64_t> all(300);
  for (size_t i = 0; i < all.size(); ++i) all[i] = all.size() - 1 - i;
  std::vector<int64_t> got = select_ranks(c.view(), all, 1 << 20);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(got[i], c.sorted[all[i]]);
}
