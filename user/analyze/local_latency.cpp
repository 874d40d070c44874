// Same-node durations between two channels, paired by tuple id.
#include "analyze/local_latency.h"

#include <algorithm>
#include <unordered_map>

namespace cptrace {

LatencySeries same_node_latency(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to) {
  LatencySeries s;
  s.from_channel = r.channel_name(from);
  s.to_channel = r.channel_name(to);
  s.from_node = s.to_node = r.meta().value("node", "");
  s.remote = false;
  s.method = "same node: TSC difference / measured frequency, bound = widest correlation bracket";
  // File order is only roughly time order: keep the earliest stamp of each tuple per side.
  std::unordered_map<uint64_t, uint64_t> a, b;
  auto keep = [&](std::unordered_map<uint64_t, uint64_t>& m, const TraceEvent& e) {
    auto [it, fresh] = m.emplace(e.tuple, e.ts);
    if (!fresh) {
      s.duplicates++;
      it->second = std::min(it->second, e.ts);
    }
  };
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    if (e.channel == from) keep(a, e);
    if (e.channel == to) keep(b, e);
  });
  uint32_t widest = 0;
  for (const ClockPoint& p : r.clock_map().points()) widest = std::max(widest, p.width_ticks);
  double w = tl.ticks_to_s(widest);
  for (const auto& [tuple, ta] : a) {
    auto it = b.find(tuple);
    if (it == b.end()) {
      s.unmatched_from++;
      continue;
    }
    double v = tl.ticks_to_s(double(int64_t(it->second - ta)));
    s.samples.push_back({tuple, tl.seconds(ta), v, v - w, v + w});
  }
  s.unmatched_to = b.size() - s.samples.size();
  std::sort(s.samples.begin(), s.samples.end(),
            [](const LatencySample& x, const LatencySample& y) { return x.at_s < y.at_s; });
  return s;
}

}  // namespace cptrace
