// Exact k-th smallest values over spillable columns (rank_select.h).
#include "tables/rank_select.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace cptrace {
namespace {

constexpr int kBucketBits = 14;

// One rank being narrowed: its value lies in [lo, hi], as the k-th smallest of
// the `count` values there.
struct Query {
  int64_t lo = 0, hi = 0;
  uint64_t k = 0, count = 0;
  bool done = false;
  int64_t value = 0;
};

int shift_for(int64_t lo, int64_t hi) {
  uint64_t span = uint64_t(hi) - uint64_t(lo);
  int s = 0;
  while ((span >> s) >= (1ull << kBucketBits)) ++s;
  return s;
}

void scan_all(const std::vector<const ValueColumn*>& cols, const auto& fn) {
  for (const ValueColumn* c : cols) c->scan(fn);
}

// Puts the values of the m increasing ranks k into their places of v[begin,
// end) (every rank inside it): the middle rank by nth_element, which leaves the
// smaller ranks' values before it and the larger after, then each side alone.
// O(n log m), where sorting (for a CDF's 400 ranks) is O(n log n).
void place_ranks(std::vector<int64_t>& v, size_t begin, size_t end, const uint64_t* k, size_t m) {
  if (!m) return;
  const size_t mid = m / 2;
  std::nth_element(v.begin() + begin, v.begin() + k[mid], v.begin() + end);
  place_ranks(v, begin, k[mid], k, mid);
  place_ranks(v, k[mid] + 1, end, k + mid + 1, m - mid - 1);
}

// All values of the union fit: select in memory.
std::vector<int64_t> select_in_memory(const std::vector<const ValueColumn*>& cols, const std::vector<uint64_t>& ks) {
  std::vector<int64_t> all;
  uint64_t n = 0;
  for (const ValueColumn* c : cols) n += c->size();
  all.reserve(n);
  scan_all(cols, [&](const int64_t* v, size_t m) { all.insert(all.end(), v, v + m); });
  // Each distinct rank once, in increasing order, put in place by splitting.
  std::vector<uint64_t> ranks(ks);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  place_ranks(all, 0, all.size(), ranks.data(), ranks.size());
  std::vector<int64_t> out(ks.size());
  for (size_t i = 0; i < ks.size(); ++i) out[i] = all[ks[i]];
  return out;
}

// Where one pass puts the values of one range: collected, or counted in its
// histogram's buckets.
struct Target {
  int64_t lo, hi;
  std::vector<int64_t>* vals;
  std::vector<uint64_t>* hist;
  int shift;
  void put(int64_t v) const {
    if (vals)
      vals->push_back(v);
    else
      (*hist)[(uint64_t(v) - uint64_t(lo)) >> shift]++;
  }
};

// Every value of the columns to the targets whose range holds it. The ranges of
// one pass are disjoint (every query is as many passes deep, each range a bucket
// of the last pass's histograms: equal ranges are one target), so beyond a few
// a value finds its one range by binary search: a CDF's hundreds of ranks cost
// one read of the values a pass, not one per rank.
void scan_targets(const std::vector<const ValueColumn*>& cols, std::vector<Target>& ts) {
  std::sort(ts.begin(), ts.end(), [](const Target& a, const Target& b) { return a.lo < b.lo; });
  bool disjoint = true;
  for (size_t i = 1; i < ts.size(); ++i) disjoint = disjoint && ts[i - 1].hi < ts[i].lo;
  scan_all(cols, [&](const int64_t* v, size_t m) {
    if (!disjoint || ts.size() <= 4) {
      for (const Target& t : ts)
        for (size_t i = 0; i < m; ++i)
          if (v[i] >= t.lo && v[i] <= t.hi) t.put(v[i]);
      return;
    }
    for (size_t i = 0; i < m; ++i) {
      auto at = std::upper_bound(ts.begin(), ts.end(), v[i], [](int64_t x, const Target& t) { return x < t.lo; });
      if (at != ts.begin() && v[i] <= (--at)->hi) at->put(v[i]);
    }
  });
}

// One pass: queries whose range fits `cap` values collect them and finish; the
// others (sharing a histogram when their ranges are equal) narrow to a bucket.
void narrow(const std::vector<const ValueColumn*>& cols, std::vector<Query>& qs, uint64_t cap) {
  std::map<std::pair<int64_t, int64_t>, std::vector<uint64_t>> hists;  // by range
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> collect;  // by range
  uint64_t collecting = 0;
  for (Query& q : qs) {
    if (q.done) continue;
    auto key = std::pair{q.lo, q.hi};
    if (collect.count(key) || hists.count(key)) continue;
    if (q.lo == q.hi) {
      q.done = true;
      q.value = q.lo;
    } else if (collecting + q.count <= cap) {
      collecting += q.count;
      collect[key].reserve(q.count);
    } else {
      hists[key].assign(size_t(1) << kBucketBits, 0);
    }
  }
  if (collect.empty() && hists.empty()) return;
  std::vector<Target> ts;
  for (auto& [r, vals] : collect) ts.push_back({r.first, r.second, &vals, nullptr, 0});
  for (auto& [r, h] : hists) ts.push_back({r.first, r.second, nullptr, &h, shift_for(r.first, r.second)});
  scan_targets(cols, ts);
  for (Query& q : qs) {
    if (q.done) continue;
    auto key = std::pair{q.lo, q.hi};
    if (auto c = collect.find(key); c != collect.end()) {
      std::nth_element(c->second.begin(), c->second.begin() + q.k, c->second.end());
      q.done = true;
      q.value = c->second[q.k];
      continue;
    }
    const std::vector<uint64_t>& h = hists.at(key);
    int s = shift_for(q.lo, q.hi);
    uint64_t below = 0;
    for (size_t b = 0; b < h.size(); ++b) {
      if (q.k < below + h[b]) {
        int64_t blo = int64_t(uint64_t(q.lo) + (uint64_t(b) << s));
        int64_t bhi =
            int64_t(std::min<uint64_t>(uint64_t(q.hi) - uint64_t(q.lo), ((uint64_t(b) + 1) << s) - 1) + uint64_t(q.lo));
        q.k -= below;
        q.count = h[b];
        q.lo = blo;
        q.hi = bhi;
        break;
      }
      below += h[b];
    }
  }
}

}  // namespace

bool ValueColumn::grow() {
  if (!pool_->take(kChunk * sizeof(int64_t))) return false;
  chunks_.emplace_back().reserve(kChunk);
  return true;
}

void ValueColumn::spill_from_now() { file_ = std::make_unique<SpillFile>(dir_, 64 << 10); }

uint64_t nearest_rank_index(uint64_t n, double p) {
  return std::min<uint64_t>(n - 1, uint64_t(std::ceil(p * double(n))) - (p > 0 ? 1 : 0));
}

int64_t nearest_rank_select(std::vector<int64_t>& v, double p) {
  auto k = v.begin() + int64_t(nearest_rank_index(v.size(), p));
  std::nth_element(v.begin(), k, v.end());
  return *k;
}

std::vector<int64_t> select_ranks(const std::vector<const ValueColumn*>& cols, const std::vector<uint64_t>& ks,
                                  uint64_t mem_bytes) {
  uint64_t n = 0;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const ValueColumn* c : cols) {
    n += c->size();
    if (c->size()) {
      lo = std::min(lo, c->min());
      hi = std::max(hi, c->max());
    }
  }
  uint64_t cap = std::max<uint64_t>(1 << 16, mem_bytes / sizeof(int64_t));
  if (n <= cap) return select_in_memory(cols, ks);
  std::vector<Query> qs;
  for (uint64_t k : ks) qs.push_back({lo, hi, k, n});
  // Each pass divides a range by 2^14 at least: 64-bit ranges end in five.
  while (std::any_of(qs.begin(), qs.end(), [](const Query& q) { return !q.done; })) narrow(cols, qs, cap);
  std::vector<int64_t> out;
  for (const Query& q : qs) out.push_back(q.value);
  return out;
}

}  // namespace cptrace
