// Live counts of a trace being written, settled so that they end as throughput's.
#include "analyze/live_view.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "cptrace.h"  // cp_channel_id
#include "trace/trace_reader.h"

namespace cptrace {

namespace {

// The band is fixed once the estimated frequency is this close (relative) to
// the final one: a boundary event of period i moves only if |dP| * i reaches it.
constexpr double kMaxBand = 1e-4;
// At least 10 ppm: CLOCK_MONOTONIC, the other side of each point, is slewed by NTP.
constexpr double kMinBand = 1e-5;

bool is_mono(const TraceEvent& e) { return e.timebase == uint8_t(Timebase::MonoNs); }

}  // namespace

// A channel named on the command line: its id is the hash of its name (or "0x<hex>").
uint64_t channel_arg_id(const std::string& name) {
  uint64_t id = 0;
  if (name.size() > 2 && name.compare(0, 2, "0x") == 0) {
    auto [end, ec] = std::from_chars(name.data() + 2, name.data() + name.size(), id, 16);
    if (ec == std::errc() && end == name.data() + name.size()) return id;
  }
  return cp_channel_id(name.c_str());
}

LiveView::LiveView(double period_ms, std::vector<std::pair<std::string, std::string>> pairs, const MemoryBudget& budget)
    : period_ms_(period_ms), pair_names_(std::move(pairs)) {
  for (const auto& [from, to] : pair_names_)
    pairs_.emplace_back(channel_arg_id(from), channel_arg_id(to), budget.bytes / pair_names_.size(),
                        budget.spill_dir());
}

void LiveView::add(const std::vector<TraceEvent>& evs) {
  for (const TraceEvent& e : evs) {
    if (e.kind != uint8_t(EventKind::Count)) events_++;
    // Kernel stamps before the last point are interpolated between two points
    // that are both read: their TSC is final. Later ones wait for the next point.
    bool final_ts = !is_mono(e) || (map_.points().size() >= 2 && e.ts < map_.points().back().mono_ns);
    if (ready() && final_ts)
      settle(e);
    else
      held_.push_back(e);
  }
}

void LiveView::settle(const TraceEvent& raw) {
  TraceEvent e = raw;
  if (is_mono(e)) {
    e.ts = map_.mono_to_tsc(e.ts);
    e.timebase = uint8_t(Timebase::Tsc);
  } else {
    // As the reader gives a TSC stamp its error: its CPU's skew where it names
    // one, else the widest (a pair of two CPUs is never taken as exact).
    e.ts_err = skew_.err_of(e);
  }
  for (SameNodePairing& p : pairs_) p.add(e);
  if (e.kind != uint8_t(EventKind::User)) return;
  // Index under the longest and the shortest length of the band: equal means
  // equal for every length between (the index is monotonic in the length).
  int64_t a = period_index(tl_, e.ts, band_->second), b = period_index(tl_, e.ts, band_->first);
  if (a == b)
    safe_.add_at(e.channel, a);
  else
    guard_.emplace_back(e.channel, e.ts);
}

void LiveView::settle_held() {
  std::vector<TraceEvent> still;
  for (const TraceEvent& e : held_) {
    if (!is_mono(e) || e.ts < map_.points().back().mono_ns)
      settle(e);
    else
      still.push_back(e);
  }
  held_.swap(still);
}

void LiveView::update(const TraceTail& tail, const nlohmann::json& meta) {
  skew_ = TscSkewHistory::from_meta(meta);
  map_ = ClockMap(tail.clock());
  if (map_.points().size() < 2) return;
  widest_ = std::max(widest_, widest_bracket(map_));
  if (!ready()) {
    Timeline tl = trace_timeline(TraceMeta::from_json(meta), tail.clock(), map_, tail.path());
    const auto& pts = map_.points();
    double span = double(pts.back().tsc - pts.front().tsc);
    // The least-squares slope is off by far less than two bracket widths over the span.
    double eps = std::max(kMinBand, 20.0 * 2 * widest_ / span);
    if (eps > kMaxBand) return;
    tl_ = tl;
    period_ = period_ticks(tl_, period_ms_, "--period", UINT64_MAX);
    band_.emplace(uint64_t(std::floor(double(period_) * (1 - eps))), uint64_t(std::ceil(double(period_) * (1 + eps))));
  }
  tl_.end = std::max(tl_.origin, map_.points().back().tsc);
  settle_held();
}

Throughput LiveView::table_with(const Timeline& tl, uint64_t period, const ClockMap& map,
                                const std::map<uint64_t, ChannelInfo>& channels) const {
  ThroughputCounter c = safe_;
  for (const auto& [ch, ts] : guard_) c.add_at(ch, period_index(tl, ts, period));
  for (TraceEvent e : held_) {
    if (is_mono(e)) e.ts = map.mono_to_tsc(e.ts);  // extrapolated until the next point
    c.add(tl, period, e);
  }
  return c.table(tl, period, period_ms_, channels);
}

nlohmann::json LiveView::pairs_json() const {
  auto out = nlohmann::json::array();
  for (size_t i = 0; i < pairs_.size(); ++i) {
    std::pair<uint64_t, uint64_t> unmatched;
    nlohmann::json j = summary_json(pairs_[i].summary(tl_, widest_, unmatched));
    j["from"] = pair_names_[i].first, j["to"] = pair_names_[i].second;
    j["unmatched_from"] = unmatched.first, j["unmatched_to"] = unmatched.second;
    // Beyond --memory the live pairing settles as it goes (local_latency.h).
    if (pairs_[i].windowed()) j["windowed"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json LiveView::snapshot(const TraceTail& tail) const {
  const Counters& k = tail.counters();
  nlohmann::json j = {{"bytes_read", tail.offset()},     {"events", events_},
                      {"seen", k.total_seen()},          {"dropped", k.total_dropped()},
                      {"filtered", k.total_filtered()},  {"held_events", held_.size()},
                      {"boundary_events", guard_.size()}};
  if (!ready()) return j;  // no timeline yet: too few correlation points
  Throughput t = table_with(tl_, period_, map_, tail.channels());
  j["trace_s"] = tl_.seconds(tl_.end);
  // events/s: the last period that ended before the last correlation point.
  int64_t last_done = period_index(tl_, tl_.end, period_) - 1 - t.first;
  double period_s = tl_.ticks_to_s(double(period_));
  j["rates"] = nlohmann::json::array();
  for (const ChannelSeries& c : t.channels) {
    double rate = last_done >= 0 && size_t(last_done) < t.periods ? double(c.counts[size_t(last_done)]) / period_s : 0;
    j["rates"].push_back({{"name", c.name}, {"id", c.id}, {"total", c.total}, {"per_s", rate}});
  }
  j["throughput"] = throughput_json(t);
  j["pairs"] = pairs_json();
  return j;
}

Throughput LiveView::final_table(const TraceTail& tail, const nlohmann::json& meta, bool& recounted) const {
  ClockMap map(tail.clock());
  Timeline tl = trace_timeline(TraceMeta::from_json(meta), tail.clock(), map, tail.path());
  uint64_t period = period_ticks(tl, period_ms_, "--period");
  recounted = !ready() || tl.origin != tl_.origin || period < band_->first || period > band_->second;
  if (!recounted) return table_with(tl, period, map, tail.channels());
  TraceReader r(tail.path());
  return compute_throughput(r, trace_timeline(r), period, period_ms_);
}

}  // namespace cptrace
