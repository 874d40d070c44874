// Summary statistics and plot data of a latency series, within a budget.
#include "analyze/latency_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "translate/rank_select.h"

namespace cptrace {
namespace {

// Doubles as int64 keys with the same order (the sign-magnitude bits folded
// into two's complement), so rank_select's columns hold them.
int64_t key_of(double d) {
  int64_t b;
  memcpy(&b, &d, sizeof b);
  return b < 0 ? b ^ INT64_MAX : b;
}
double double_of(int64_t k) {
  int64_t b = k < 0 ? k ^ INT64_MAX : k;
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

struct FirstPass {
  uint64_t n = 0;
  double sum = 0, vmin = 0, vmax = 0, lo_min = 0, hi_max = 0, wmax = 0, t0 = 0, t1 = 0;
  void add(const LatencySample& x) {
    double w = x.hi_s - x.lo_s;
    if (n++ == 0) {
      vmin = vmax = x.value_s, lo_min = x.lo_s, hi_max = x.hi_s, wmax = w, t0 = t1 = x.at_s;
    } else {
      vmin = std::min(vmin, x.value_s), vmax = std::max(vmax, x.value_s);
      lo_min = std::min(lo_min, x.lo_s), hi_max = std::max(hi_max, x.hi_s);
      wmax = std::max(wmax, w), t0 = std::min(t0, x.at_s), t1 = std::max(t1, x.at_s);
    }
    sum += x.value_s;
  }
};

// The histogram's bins and the bound width's time slices: one more pass, now
// that the ranges are known.
void second_pass(LatencySeries& s, const SampleScan& scan, const FirstPass& f) {
  constexpr int kBins = 40;
  constexpr size_t kSlices = 200;
  std::vector<uint64_t> counts(kBins, 0);
  double step = f.t1 > f.t0 ? (f.t1 - f.t0) / double(kSlices) : 1;
  std::vector<double> first_at(kSlices, std::numeric_limits<double>::infinity()), widest(kSlices, 0);
  std::vector<bool> used(kSlices, false);
  bool spread = f.vmax > f.vmin;
  scan([&](const LatencySample& x) {
    if (spread) counts[std::min(size_t(kBins) - 1, size_t((x.value_s - f.vmin) / (f.vmax - f.vmin) * kBins))]++;
    size_t b = std::min(kSlices - 1, size_t((x.at_s - f.t0) / step));
    used[b] = true;
    first_at[b] = std::min(first_at[b], x.at_s);
    widest[b] = std::max(widest[b], x.hi_s - x.lo_s);
  });
  if (spread)
    s.histogram = {{"lo_s", f.vmin}, {"hi_s", f.vmax}, {"counts", counts}};
  else
    s.histogram = {{"lo_s", f.vmin}, {"hi_s", f.vmax}, {"counts", {f.n}}};
  for (size_t b = 0; b < kSlices; ++b)
    if (used[b]) s.width_over_time.push_back({first_at[b], widest[b]});
}

}  // namespace

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  return v[nearest_rank_index(v.size(), q)];
}

nlohmann::json cdf_points(uint64_t n, const std::function<double(uint64_t)>& value_at, size_t points) {
  nlohmann::json pts = nlohmann::json::array();
  if (!n) return pts;
  uint64_t step = std::max<uint64_t>(1, (n + points - 1) / points);
  // Rank i (0-based) holds the value below or at which (i + 1) / n of the tuples lie.
  for (uint64_t i = step - 1; i < n; i += step) pts.push_back({value_at(i), double(i + 1) / double(n)});
  if (pts.back()[1].get<double>() < 1) pts.push_back({value_at(n - 1), 1.0});
  return pts;
}

void fill_series_stats(LatencySeries& s, const SampleScan& scan, const MemoryBudget& budget) {
  MemoryPool pool{budget.share(0.3).bytes, 0};
  std::string dir = budget.spill_dir();
  ValueColumn values(pool, dir), widths(pool, dir);
  FirstPass f;
  scan([&](const LatencySample& x) {
    f.add(x);
    values.add(key_of(x.value_s));
    widths.add(key_of(x.hi_s - x.lo_s));
  });
  s.histogram = nullptr;
  s.cdf = nlohmann::json::array();
  s.width_over_time = nlohmann::json::array();
  LatencySummary& m = s.summary;
  m = LatencySummary{};
  m.count = f.n;
  if (!f.n) return;
  // Every rank asked of the values in one selection: the summary's and the CDF's.
  std::vector<uint64_t> ks;
  for (double q : {0.25, 0.5, 0.75, 0.9, 0.99}) ks.push_back(nearest_rank_index(f.n, q));
  std::vector<uint64_t> cdf_ranks;
  cdf_points(f.n, [&](uint64_t k) {
    cdf_ranks.push_back(k);
    return 0.0;
  });
  ks.insert(ks.end(), cdf_ranks.begin(), cdf_ranks.end());
  uint64_t select_bytes = budget.share(0.3).bytes;
  std::vector<int64_t> got = select_ranks({&values}, ks, select_bytes);
  m.p25 = double_of(got[0]), m.p50 = double_of(got[1]), m.p75 = double_of(got[2]);
  m.p90 = double_of(got[3]), m.p99 = double_of(got[4]);
  size_t next = 5;
  s.cdf = cdf_points(f.n, [&](uint64_t) { return double_of(got[next++]); });
  m.width_p50 = double_of(select_ranks({&widths}, {nearest_rank_index(f.n, 0.5)}, select_bytes)[0]);
  m.min = f.vmin, m.max = f.vmax, m.mean = f.sum / double(f.n);
  m.lo_min = f.lo_min, m.hi_max = f.hi_max, m.width_max = f.wmax;
  second_pass(s, scan, f);
}

nlohmann::json summary_json(const LatencySummary& s) {
  return {{"count", s.count},
          {"min_s", s.min},
          {"p25_s", s.p25},
          {"p50_s", s.p50},
          {"p75_s", s.p75},
          {"p90_s", s.p90},
          {"p99_s", s.p99},
          {"max_s", s.max},
          {"mean_s", s.mean},
          {"lo_min_s", s.lo_min},
          {"hi_max_s", s.hi_max},
          {"width_p50_s", s.width_p50},
          {"width_max_s", s.width_max}};
}

}  // namespace cptrace
