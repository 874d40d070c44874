// Same-node durations between two channels, paired by tuple id.
#include "analyze/local_latency.h"

#include <algorithm>
#include <unordered_map>

namespace cptrace {

void SameNodePairing::add(const TraceEvent& e) {
  if (e.kind != uint8_t(EventKind::User)) return;
  if (e.channel == from_ || e.channel == to_) max_err_ = std::max(max_err_, e.ts_err);
  auto keep = [&](std::unordered_map<uint64_t, uint64_t>& m) {
    auto [it, fresh] = m.emplace(e.tuple, e.ts);
    if (!fresh) {
      duplicates_++;
      it->second = std::min(it->second, e.ts);
    }
  };
  if (e.channel == from_) keep(a_);
  if (e.channel == to_) keep(b_);
}

LatencySeries SameNodePairing::series(const Timeline& tl, uint32_t widest, const std::string& from_name,
                                      const std::string& to_name, const std::string& node) const {
  LatencySeries s;
  s.from_channel = from_name;
  s.to_channel = to_name;
  s.from_node = s.to_node = node;
  s.remote = false;
  s.method = "same node: TSC difference / measured frequency, bound = widest correlation bracket or conversion error";
  s.duplicates = duplicates_;
  double w = bound_s(tl, widest);
  std::vector<LatencySample> samples;
  for (const auto& [tuple, ta] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) {
      s.unmatched_from++;
      continue;
    }
    double v = tl.ticks_to_s(double(int64_t(it->second - ta)));
    samples.push_back({tuple, tl.seconds(ta), v, v - w, v + w});
  }
  s.unmatched_to = b_.size() - samples.size();
  // Time order, so that the mean's sum has one order whatever the hash map's.
  std::sort(samples.begin(), samples.end(), [](const LatencySample& x, const LatencySample& y) {
    return x.at_s < y.at_s || (x.at_s == y.at_s && x.tuple < y.tuple);
  });
  MemoryBudget unlimited;
  unlimited.bytes = ~0ull >> 1;
  fill_series_stats(s, [&](const auto& fn) { for (const LatencySample& x : samples) fn(x); }, unlimited);
  return s;
}

LatencySummary SameNodePairing::summary(const Timeline& tl, uint32_t widest,
                                        std::pair<uint64_t, uint64_t>& unmatched) const {
  std::vector<double> v;
  v.reserve(std::min(a_.size(), b_.size()));
  double sum = 0;
  for (const auto& [tuple, ta] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) continue;
    v.push_back(tl.ticks_to_s(double(int64_t(it->second - ta))));
    sum += v.back();
  }
  unmatched = {a_.size() - v.size(), b_.size() - v.size()};
  LatencySummary m;
  m.count = v.size();
  if (v.empty()) return m;
  std::sort(v.begin(), v.end());
  double w = bound_s(tl, widest);  // the same bound on every sample
  m.min = v.front(), m.max = v.back(), m.mean = sum / double(m.count);
  m.p25 = percentile_sorted(v, 0.25), m.p50 = percentile_sorted(v, 0.50), m.p75 = percentile_sorted(v, 0.75);
  m.p90 = percentile_sorted(v, 0.90), m.p99 = percentile_sorted(v, 0.99);
  m.lo_min = m.min - w, m.hi_max = m.max + w;
  m.width_p50 = m.width_max = 2 * w;
  return m;
}

LatencySeries same_node_latency(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to) {
  SameNodePairing p(from, to);
  r.for_each_event([&](const TraceEvent& e) { p.add(e); });
  uint32_t widest = 0;
  for (const ClockPoint& pt : r.clock_map().points()) widest = std::max(widest, pt.width_ticks);
  return p.series(tl, widest, r.channel_name(from), r.channel_name(to), r.meta().value("node", ""));
}

}  // namespace cptrace
