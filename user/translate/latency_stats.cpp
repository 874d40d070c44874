// Nearest-rank percentiles of latency rows and their strict bounds.
#include "translate/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cptrace {

namespace {

// Nearest rank: the ceil(q n)-th smallest (the first for q = 0), as the
// summary of `cptrace latency` and the report's latency table use.
Percentiles percentiles(std::vector<int64_t> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) { return v[std::min(v.size(), std::max<size_t>(1, size_t(std::ceil(q * double(v.size()))))) - 1]; };
  p.min = v.front(), p.p50 = rank(0.5), p.p90 = rank(0.9), p.p99 = rank(0.99), p.max = v.back();
  return p;
}

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"min", p.min}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

}  // namespace

LatencyStats latency_stats(const LatencyResult& res, const std::string& from, const std::string& to) {
  LatencyStats s;
  s.from = from, s.to = to;
  s.unit = res.have_ns ? "ns" : "ticks";
  s.count = res.rows.size();
  std::vector<int64_t> v, lo, hi, w;
  for (const LatencyRow& r : res.rows) {
    v.push_back(res.have_ns ? r.ns : r.ticks);
    lo.push_back(res.have_ns ? r.ns_lo : r.ticks_lo);
    hi.push_back(res.have_ns ? r.ns_hi : r.ticks_hi);
    w.push_back(hi.back() - lo.back());
  }
  s.value = percentiles(std::move(v));
  s.lo = percentiles(std::move(lo));
  s.hi = percentiles(std::move(hi));
  s.width = percentiles(std::move(w));
  s.from_only = res.from_only, s.to_only = res.to_only;
  s.duplicates = res.from_duplicates + res.to_duplicates;
  return s;
}

nlohmann::json latency_stats_json(const LatencyStats& s) {
  return {{"from", s.from},
          {"to", s.to},
          {"unit", s.unit},
          {"count", s.count},
          {"value", percentiles_json(s.value)},
          {"lo", percentiles_json(s.lo)},
          {"hi", percentiles_json(s.hi)},
          {"width", percentiles_json(s.width)},
          {"unmatched_from", s.from_only},
          {"unmatched_to", s.to_only},
          {"duplicates", s.duplicates}};
}

}  // namespace cptrace
