// Summary statistics and plot data of a latency series, within a budget.
#include "latency/latency_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "latency/latency_periods.h"
#include "tables/rank_select.h"

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

// The histogram's bins, the bound width's time slices and the percentiles per
// period: one more pass, now that the ranges are known.
class SecondPass {
 public:
  explicit SecondPass(const FirstPass& f)
      : f_(f),
        counts_(kBins, 0),
        step_(f.t1 > f.t0 ? (f.t1 - f.t0) / double(kSlices) : 1),
        first_at_(kSlices, std::numeric_limits<double>::infinity()),
        widest_(kSlices, 0),
        used_(kSlices, false),
        spread_(f.vmax > f.vmin),
        periods_(f.t0, f.t1, f.lo_min, f.hi_max) {}
  void add(const LatencySample& x) {
    if (spread_) counts_[std::min(size_t(kBins) - 1, size_t((x.value_s - f_.vmin) / (f_.vmax - f_.vmin) * kBins))]++;
    size_t b = std::min(kSlices - 1, size_t((x.at_s - f_.t0) / step_));
    used_[b] = true;
    first_at_[b] = std::min(first_at_[b], x.at_s);
    widest_[b] = std::max(widest_[b], x.hi_s - x.lo_s);
    periods_.add(x);
  }
  void finish(LatencySeries& s) const {
    if (spread_)
      s.histogram = {{"lo_s", f_.vmin}, {"hi_s", f_.vmax}, {"counts", counts_}};
    else
      s.histogram = {{"lo_s", f_.vmin}, {"hi_s", f_.vmax}, {"counts", {f_.n}}};
    for (size_t b = 0; b < kSlices; ++b)
      if (used_[b]) s.width_over_time.push_back({first_at_[b], widest_[b]});
    s.over_time = periods_.to_json();
  }

 private:
  static constexpr int kBins = 40;
  static constexpr size_t kSlices = 200;
  const FirstPass& f_;
  std::vector<uint64_t> counts_;
  double step_;
  std::vector<double> first_at_, widest_;
  std::vector<bool> used_;
  bool spread_;
  LatencyPeriods periods_;
};

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

struct SeriesFiller::Series {
  ValueColumn values, widths;
  FirstPass first;
  Series(MemoryPool& pool, const std::string& dir) : values(pool, dir), widths(pool, dir) {}
};

SeriesFiller::SeriesFiller(const MemoryBudget& budget)
    : pool_{budget.share(0.3).bytes, 0}, select_bytes_(budget.share(0.3).bytes), dir_(budget.spill_dir()) {}

SeriesFiller::~SeriesFiller() = default;

void SeriesFiller::add(size_t series, const LatencySample& x) {
  while (series_.size() <= series) series_.push_back(std::make_unique<Series>(pool_, dir_));
  Series& s = *series_[series];
  s.first.add(x);
  s.values.add(key_of(x.value_s));
  s.widths.add(key_of(x.hi_s - x.lo_s));
}

void SeriesFiller::finish(const std::vector<LatencySeries*>& out, const MultiScan& scan) {
  while (series_.size() < out.size()) series_.push_back(std::make_unique<Series>(pool_, dir_));
  std::vector<std::unique_ptr<SecondPass>> second(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    LatencySeries& s = *out[i];
    const FirstPass& f = series_[i]->first;
    s.histogram = nullptr;
    s.cdf = nlohmann::json::array();
    s.width_over_time = nlohmann::json::array();
    s.over_time = nlohmann::json::array();
    LatencySummary& m = s.summary;
    m = LatencySummary{};
    m.count = f.n;
    if (!f.n) continue;
    // Every rank asked of the values in one selection: the summary's and the CDF's.
    // (min and max come from the first pass.)
    using P = Percentiles<double>;
    const std::vector<P::Field> asked{&P::p25, &P::p50, &P::p75, &P::p90, &P::p99};
    std::vector<uint64_t> ks = P::ranks(f.n, asked);
    std::vector<uint64_t> cdf_ranks;
    cdf_points(f.n, [&](uint64_t k) {
      cdf_ranks.push_back(k);
      return 0.0;
    });
    ks.insert(ks.end(), cdf_ranks.begin(), cdf_ranks.end());
    std::vector<int64_t> got = select_ranks({&series_[i]->values}, ks, select_bytes_);
    P::fill(m, asked, got, double_of);
    size_t next = asked.size();
    s.cdf = cdf_points(f.n, [&](uint64_t) { return double_of(got[next++]); });
    m.width_p50 = double_of(select_ranks({&series_[i]->widths}, {nearest_rank_index(f.n, 0.5)}, select_bytes_)[0]);
    m.min = f.vmin, m.max = f.vmax, m.mean = f.sum / double(f.n);
    m.lo_min = f.lo_min, m.hi_max = f.hi_max, m.width_max = f.wmax;
    second[i] = std::make_unique<SecondPass>(f);
  }
  bool any = false;
  for (const auto& p : second) any = any || p;
  if (any)
    scan([&](size_t i, const LatencySample& x) {
      if (i < second.size() && second[i]) second[i]->add(x);
    });
  for (size_t i = 0; i < out.size(); ++i)
    if (second[i]) second[i]->finish(*out[i]);
}

void fill_series_stats(LatencySeries& s, const SampleScan& scan, const MemoryBudget& budget) {
  SeriesFiller f(budget);
  scan([&](const LatencySample& x) { f.add(0, x); });
  f.finish({&s}, [&](const std::function<void(size_t, const LatencySample&)>& fn) {
    scan([&](const LatencySample& x) { fn(0, x); });
  });
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
