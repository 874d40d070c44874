// Summary statistics of a latency series.
#include "analyze/latency_table.h"

#include <algorithm>
#include <cmath>

namespace cptrace {

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t rank = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

LatencySummary summarize(const LatencySeries& s) {
  LatencySummary m;
  m.count = s.samples.size();
  if (!m.count) return m;
  std::vector<double> v, w;
  v.reserve(m.count);
  w.reserve(m.count);
  double sum = 0;
  m.lo_min = s.samples[0].lo_s;
  m.hi_max = s.samples[0].hi_s;
  for (const auto& x : s.samples) {
    v.push_back(x.value_s);
    w.push_back(x.hi_s - x.lo_s);
    sum += x.value_s;
    m.lo_min = std::min(m.lo_min, x.lo_s);
    m.hi_max = std::max(m.hi_max, x.hi_s);
  }
  std::sort(v.begin(), v.end());
  std::sort(w.begin(), w.end());
  m.min = v.front();
  m.max = v.back();
  m.p25 = percentile_sorted(v, 0.25);
  m.p50 = percentile_sorted(v, 0.50);
  m.p75 = percentile_sorted(v, 0.75);
  m.p90 = percentile_sorted(v, 0.90);
  m.p99 = percentile_sorted(v, 0.99);
  m.mean = sum / double(m.count);
  m.width_p50 = percentile_sorted(w, 0.5);
  m.width_max = w.back();
  return m;
}

nlohmann::json summary_json(const LatencySummary& s) {
  return {{"count", s.count}, {"min_s", s.min},       {"p25_s", s.p25},       {"p50_s", s.p50},
          {"p75_s", s.p75},   {"p90_s", s.p90},       {"p99_s", s.p99},       {"max_s", s.max},
          {"mean_s", s.mean}, {"lo_min_s", s.lo_min}, {"hi_max_s", s.hi_max}, {"width_p50_s", s.width_p50},
          {"width_max_s", s.width_max}};
}

}  // namespace cptrace
