// Same-node durations between two channels, paired by tuple id.
#include "latency/local_latency.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "clock/tsc_frequency.h"
#include "tables/run_merge.h"
#include "tables/tuple_join.h"
#include "translate/stamp_errors.h"

namespace cptrace {

int64_t pair_bound(uint32_t widest, uint64_t max_err) {
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  return int64_t(std::max<uint64_t>(widest, max_err > kMax / 2 ? kMax : 2 * max_err));
}

uint32_t widest_bracket(const ClockMap& map) {
  uint32_t w = 0;
  for (const ClockPoint& pt : map.points()) w = std::max(w, pt.width_ticks);
  return w;
}

void SameNodePairing::add(const TraceEvent& e) {
  if (e.kind != uint8_t(EventKind::User)) return;
  if (e.channel == from_ || e.channel == to_) width_.add(e);
  auto keep = [&](std::unordered_map<uint64_t, Stamp>& m) {
    const Stamp st{e.ts, e.cpu, e.timebase == uint8_t(Timebase::TscOnCpu)};
    auto [it, fresh] = m.emplace(e.tuple, st);
    if (!fresh) {
      duplicates_++;
      if (e.ts < it->second.ts) it->second = st;
    }
  };
  if (e.channel == from_) keep(a_);
  if (e.channel == to_) keep(b_);
  if (a_.size() + b_.size() > max_ids_) settle();
}

void SameNodePairing::Extremes::add(int64_t d, int64_t w) {
  if (!any || d - w < lo_d - lo_w) lo_d = d, lo_w = w;
  if (!any || d + w > hi_d + hi_w) hi_d = d, hi_w = w;
  any = true;
}

// Beyond the budget: paired ids leave the maps for the settled columns; if the
// ids pending on one side alone still do not fit, they are dropped (counted).
void SameNodePairing::settle() {
  if (!settled_) {
    settled_ = std::make_unique<ValueColumn>(pool_, spill_dir_);
    settled_widths_ = std::make_unique<ValueColumn>(pool_, spill_dir_);
  }
  for (auto it = a_.begin(); it != a_.end();) {
    auto b = b_.find(it->first);
    if (b == b_.end()) {
      ++it;
      continue;
    }
    const int64_t d = int64_t(b->second.ts - it->second.ts), w = width_.of_cpus(it->second.join(), b->second.join());
    settled_->add(d);
    settled_widths_->add(w);
    (w == SameNodeWidth::kNodeWide ? settled_node_ : settled_own_).add(d, w == SameNodeWidth::kNodeWide ? 0 : w);
    settled_ticks_ += d;
    b_.erase(b);
    it = a_.erase(it);
  }
  if (a_.size() + b_.size() > max_ids_ / 2) {
    dropped_from_ += a_.size();
    dropped_to_ += b_.size();
    a_.clear();
    b_.clear();
  }
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
  std::vector<LatencySample> samples;
  for (const auto& [tuple, sa] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) {
      s.unmatched_from++;
      continue;
    }
    double v = tl.ticks_to_s(double(int64_t(it->second.ts - sa.ts)));
    double w = tl.ticks_to_s(double(width_(sa.join(), it->second.join(), widest)));
    samples.push_back({tuple, tl.seconds(sa.ts), v, v - w, v + w});
  }
  s.unmatched_to = b_.size() - samples.size();
  // Time order, so that the mean's sum has one order whatever the hash map's.
  std::sort(samples.begin(), samples.end(), [](const LatencySample& x, const LatencySample& y) {
    return x.at_s < y.at_s || (x.at_s == y.at_s && x.tuple < y.tuple);
  });
  MemoryBudget unlimited;
  unlimited.bytes = ~0ull >> 1;
  fill_series_stats(
      s,
      [&](const auto& fn) {
        for (const LatencySample& x : samples) fn(x);
      },
      unlimited);
  return s;
}

LatencySummary SameNodePairing::summary(const Timeline& tl, uint32_t widest,
                                        std::pair<uint64_t, uint64_t>& unmatched) const {
  if (settled_) return settled_summary(tl, widest, unmatched);
  std::vector<double> v, widths;
  v.reserve(std::min(a_.size(), b_.size()));
  double sum = 0, lo_min = 0, hi_max = 0;
  for (const auto& [tuple, sa] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) continue;
    const double x = tl.ticks_to_s(double(int64_t(it->second.ts - sa.ts)));
    const double w = tl.ticks_to_s(double(width_(sa.join(), it->second.join(), widest)));
    lo_min = v.empty() ? x - w : std::min(lo_min, x - w);
    hi_max = v.empty() ? x + w : std::max(hi_max, x + w);
    v.push_back(x);
    widths.push_back((x + w) - (x - w));  // as a sample's hi - lo
    sum += x;
  }
  unmatched = {a_.size() - v.size(), b_.size() - v.size()};
  LatencySummary m;
  m.count = v.size();
  if (v.empty()) return m;
  std::sort(v.begin(), v.end());
  using P = Percentiles<double>;
  const std::vector<P::Field> asked = all_percentiles<double>();
  P::fill(m, asked, P::ranks(m.count, asked), [&](uint64_t k) { return v[k]; });
  m.mean = sum / double(m.count);
  m.lo_min = lo_min, m.hi_max = hi_max;
  auto mid = widths.begin() + ptrdiff_t(nearest_rank_index(widths.size(), 0.5));
  std::nth_element(widths.begin(), mid, widths.end());
  m.width_p50 = *mid;
  m.width_max = *std::max_element(widths.begin(), widths.end());
  return m;
}

// The same over the settled durations and the ids paired since, selected in
// ticks (the conversion to seconds is increasing, so ranks are kept).
LatencySummary SameNodePairing::settled_summary(const Timeline& tl, uint32_t widest,
                                                std::pair<uint64_t, uint64_t>& unmatched) const {
  MemoryPool scratch{~0ull >> 1, 0};
  ValueColumn recent(scratch, spill_dir_), recent_widths(scratch, spill_dir_);
  Extremes own = settled_own_, node = settled_node_;
  long double ticks = settled_ticks_;
  uint64_t paired = 0;
  for (const auto& [tuple, sa] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) continue;
    const int64_t d = int64_t(it->second.ts - sa.ts), w = width_.of_cpus(sa.join(), it->second.join());
    recent.add(d);
    recent_widths.add(w);
    (w == SameNodeWidth::kNodeWide ? node : own).add(d, w == SameNodeWidth::kNodeWide ? 0 : w);
    ticks += d;
    paired++;
  }
  unmatched = {a_.size() - paired + dropped_from_, b_.size() - paired + dropped_to_};
  LatencySummary m;
  m.count = settled_->size() + paired;
  if (!m.count) return m;
  using P = Percentiles<double>;
  const std::vector<P::Field> asked = all_percentiles<double>();
  std::vector<int64_t> got = select_ranks({settled_.get(), &recent}, P::ranks(m.count, asked), pool_.limit);
  P::fill(m, asked, got, [&](int64_t t) { return tl.ticks_to_s(double(t)); });
  m.mean = tl.ticks_to_s(double(ticks / (long double)m.count));
  // Node-wide widths are the largest (SameNodeWidth), so their placeholder ranks them right.
  const int64_t node_w = width_.node_wide(widest);
  auto half = [&](int64_t w) { return tl.ticks_to_s(double(w == SameNodeWidth::kNodeWide ? node_w : w)); };
  auto lo = [&](int64_t d, int64_t w) { return tl.ticks_to_s(double(d)) - half(w); };
  auto hi = [&](int64_t d, int64_t w) { return tl.ticks_to_s(double(d)) + half(w); };
  const double inf = std::numeric_limits<double>::infinity();
  m.lo_min = std::min(own.any ? lo(own.lo_d, own.lo_w) : inf, node.any ? lo(node.lo_d, SameNodeWidth::kNodeWide) : inf);
  m.hi_max =
      std::max(own.any ? hi(own.hi_d, own.hi_w) : -inf, node.any ? hi(node.hi_d, SameNodeWidth::kNodeWide) : -inf);
  const int64_t w50 =
      select_ranks({settled_widths_.get(), &recent_widths}, {nearest_rank_index(m.count, 0.5)}, pool_.limit)[0];
  m.width_p50 = 2 * half(w50);
  m.width_max = 2 * half(std::max(settled_widths_->max(), recent_widths.size() ? recent_widths.max() : 0));
  return m;
}

namespace {

// A paired tuple as the merge holds it, keyed by its first to-event's position,
// with its bound's half-width in ticks.
struct LocalPair {
  uint64_t seq, tuple, ta, tb;
  int64_t w;
};
struct LocalKey {
  uint64_t operator()(const LocalPair& p) const { return p.seq; }
};

JoinStamp local_stamp(const TraceEvent& e) {
  JoinStamp st;
  st.local = e.ts;
  st.cpu = e.cpu;
  st.cpu_stamped = e.timebase == uint8_t(Timebase::TscOnCpu);
  return st;
}

// The rows of node_latency_stream(), expanded from the pairs as they are read.
class NodeRows : public LatencyRowSource {
 public:
  NodeRows(const MemoryBudget& budget, const LatencyResult& res)
      : pairs(budget.share(0.25).bytes, budget.spill_dir()),
        have_ns_(res.have_ns),
        to_ns_(double(res.hz), double(res.hz_lo), double(res.hz_hi)) {}
  void for_each(const std::function<void(const LatencyRow&)>& fn) const override {
    pairs.for_each([&](const LocalPair& p) { fn(expand(p)); });
  }
  mutable RunMerge<LocalPair, LocalKey> pairs;  // reading may move its last runs to file

 private:
  LatencyRow expand(const LocalPair& p) const {
    LatencyRow row;
    row.tuple = p.tuple;
    row.scenario = "same-node";
    row.ticks = int64_t(p.tb - p.ta);
    row.ticks_lo = row.ticks - p.w;
    row.ticks_hi = row.ticks + p.w;
    row.from_ref = int64_t(p.ta);
    if (have_ns_) {
      NsBound ns = to_ns_(row.ticks, row.ticks_lo, row.ticks_hi);
      row.ns = ns.ns, row.ns_lo = ns.lo, row.ns_hi = ns.hi;
    }
    return row;
  }
  bool have_ns_;
  // The frequencies as doubles, as they always were here; their factors
  // computed once, not per row.
  TicksToNs to_ns_;
};

// A strict interval around the TSC frequency from the first and last correlation
// points (clock/tsc_frequency.h; translate measures the reference's the same way),
// widened across TSC rate changes. False with fewer than two points.
bool frequency_interval(const ClockMap& map, double& lo, double& hi) {
  if (map.points().size() < 2) return false;
  auto f = map.tsc_frequency(0, map.points().size() - 1);
  if (!f) return false;
  lo = f->lo, hi = f->hi;
  return true;
}

}  // namespace

LatencyResult node_latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                                  const MemoryBudget& budget) {
  if (r.error()) throw *r.error();
  uint64_t cf = latency_channel(r, from), ct = latency_channel(r, to);
  Timeline tl = trace_timeline(r);
  LatencyResult res;
  res.budget = budget;
  res.node_names = {r.trace_meta().node};
  res.method = "same-node";
  res.ref_origin = tl.origin;
  res.hz = tl.hz;
  res.have_ns = frequency_interval(r.clock_map(), res.hz_lo, res.hz_hi);
  if (!res.have_ns) res.hz = res.hz_lo = res.hz_hi = 0;
  TupleJoin join(budget.share(0.5), TupleJoin::Keep::Earliest);
  SameNodeWidth width;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User) || (e.channel != cf && e.channel != ct)) return;
    width.add(e);
    JoinStamp st = local_stamp(e);
    if (e.channel == cf) join.add(false, e.tuple, st);
    if (e.channel == ct) join.add(true, e.tuple, st);
  });
  const uint32_t widest = widest_bracket(r.clock_map());
  auto rows = std::make_shared<NodeRows>(budget, res);
  JoinCounts c = join.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& b) {
        rows->pairs.add({seq, tuple, a.local, b.local, width(a, b, widest)});
      },
      [&] { rows->pairs.end_run(); });
  res.take_join(c, rows);
  return res;
}

LatencySeries same_node_latency(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to,
                                const MemoryBudget& budget) {
  // The pairing of SameNodePairing (earliest stamp per side, repeats counted),
  // through the tuple join, so that any length of trace fits the budget.
  TupleJoin join(budget.share(0.5), TupleJoin::Keep::Earliest);
  SameNodeWidth width;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    if (e.channel != from && e.channel != to) return;
    width.add(e);
    JoinStamp st = local_stamp(e);
    if (e.channel == from) join.add(false, e.tuple, st);
    if (e.channel == to) join.add(true, e.tuple, st);
  });
  const uint32_t widest = widest_bracket(r.clock_map());
  RunMerge<LocalPair, LocalKey> pairs(budget.share(0.2).bytes, budget.spill_dir());
  JoinCounts c = join.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& b) {
        pairs.add({seq, tuple, a.local, b.local, width(a, b, widest)});
      },
      [&] { pairs.end_run(); });
  LatencySeries s;
  s.from_channel = r.channel_name(from);
  s.to_channel = r.channel_name(to);
  s.from_node = s.to_node = r.trace_meta().node;
  s.method = "same node: TSC difference / measured frequency, bound = widest correlation bracket or conversion error";
  s.duplicates = c.from_duplicates + c.to_duplicates;
  s.unmatched_from = c.from_only;
  s.unmatched_to = c.to_only;
  auto scan = [&](const std::function<void(const LatencySample&)>& fn) {
    pairs.for_each([&](const LocalPair& p) {
      double v = tl.ticks_to_s(double(int64_t(p.tb - p.ta)));
      const double pw = tl.ticks_to_s(double(p.w));
      fn({p.tuple, tl.seconds(p.ta), v, v - pw, v + pw});
    });
  };
  fill_series_stats(s, scan, budget.share(0.5));
  return s;
}

}  // namespace cptrace
