// Same-node durations between two channels, paired by tuple id.
#include "latency/local_latency.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "trace/tsc_frequency.h"
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
  if (a_.size() + b_.size() > max_ids_) settle();
}

// Beyond the budget: paired ids leave the maps for the settled column; if the
// ids pending on one side alone still do not fit, they are dropped (counted).
void SameNodePairing::settle() {
  if (!settled_) settled_ = std::make_unique<ValueColumn>(pool_, spill_dir_);
  for (auto it = a_.begin(); it != a_.end();) {
    auto b = b_.find(it->first);
    if (b == b_.end()) {
      ++it;
      continue;
    }
    int64_t d = int64_t(b->second - it->second);
    settled_->add(d);
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
  using P = Percentiles<double>;
  const std::vector<P::Field> asked = all_percentiles<double>();
  P::fill(m, asked, P::ranks(m.count, asked), [&](uint64_t k) { return v[k]; });
  m.mean = sum / double(m.count);
  m.lo_min = m.min - w, m.hi_max = m.max + w;
  m.width_p50 = m.width_max = 2 * w;
  return m;
}

// The same over the settled durations and the ids paired since, selected in
// ticks (the conversion to seconds is increasing, so ranks are kept).
LatencySummary SameNodePairing::settled_summary(const Timeline& tl, uint32_t widest,
                                                std::pair<uint64_t, uint64_t>& unmatched) const {
  MemoryPool scratch{~0ull >> 1, 0};
  ValueColumn recent(scratch, spill_dir_);
  long double ticks = settled_ticks_;
  uint64_t paired = 0;
  for (const auto& [tuple, ta] : a_) {
    auto it = b_.find(tuple);
    if (it == b_.end()) continue;
    recent.add(int64_t(it->second - ta));
    ticks += int64_t(it->second - ta);
    paired++;
  }
  unmatched = {a_.size() - paired + dropped_from_, b_.size() - paired + dropped_to_};
  LatencySummary m;
  m.count = settled_->size() + paired;
  if (!m.count) return m;
  using P = Percentiles<double>;
  const std::vector<P::Field> asked = all_percentiles<double>();
  std::vector<int64_t> got = select_ranks({settled_.get(), &recent}, P::ranks(m.count, asked), pool_.limit);
  double w = bound_s(tl, widest);
  P::fill(m, asked, got, [&](int64_t t) { return tl.ticks_to_s(double(t)); });
  m.mean = tl.ticks_to_s(double(ticks / (long double)m.count));
  m.lo_min = m.min - w, m.hi_max = m.max + w;
  m.width_p50 = m.width_max = 2 * w;
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

// A same-node pair's half-width (ticks): none for two stamps of one CPU's TSC
// (exact in ticks); the sum of both stamps' own errors, their CPUs' skews,
// where both name their CPU (no conversion: the bracket does not apply); else
// pair_bound() over the stamps of both channels.
struct LocalWidth {
  StampErrors errs;
  uint32_t widest = 0;
  int64_t operator()(const JoinStamp& a, const JoinStamp& b) const {
    if (one_cpu(a, b)) return 0;
    if (!a.cpu_stamped || !b.cpu_stamped) return pair_bound(widest, errs.any());
    const uint64_t ea = errs.of(true, a.cpu), eb = errs.of(true, b.cpu);
    constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
    return int64_t(ea > kMax - std::min(eb, kMax) ? kMax : ea + eb);
  }
  void add(const TraceEvent& e) { errs.add(e.ts_err, e.timebase == uint8_t(Timebase::TscOnCpu), e.cpu); }
};

// The rows of node_latency_stream(), expanded from the pairs as they are read.
class NodeRows : public LatencyRowSource {
 public:
  NodeRows(const MemoryBudget& budget, const LatencyResult& res)
      : pairs(budget.share(0.25).bytes, budget.spill_dir()),
        have_ns_(res.have_ns),
        hz_(res.hz),
        hz_lo_(res.hz_lo),
        hz_hi_(res.hz_hi) {}
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
      NsBound ns = ticks_to_ns(row.ticks, row.ticks_lo, row.ticks_hi, hz_, hz_lo_, hz_hi_);
      row.ns = ns.ns, row.ns_lo = ns.lo, row.ns_hi = ns.hi;
    }
    return row;
  }
  bool have_ns_;
  double hz_, hz_lo_, hz_hi_;
};

// A strict interval around the TSC frequency from the first and last correlation
// points (trace/tsc_frequency.h; translate measures the reference's the same way),
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
  res.node_names = {r.meta().value("node", "")};
  res.method = "same-node";
  res.ref_origin = tl.origin;
  res.hz = tl.hz;
  res.have_ns = frequency_interval(r.clock_map(), res.hz_lo, res.hz_hi);
  if (!res.have_ns) res.hz = res.hz_lo = res.hz_hi = 0;
  TupleJoin join(budget.share(0.5), TupleJoin::Keep::Earliest);
  LocalWidth width;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User) || (e.channel != cf && e.channel != ct)) return;
    width.add(e);
    JoinStamp st = local_stamp(e);
    if (e.channel == cf) join.add(false, e.tuple, st);
    if (e.channel == ct) join.add(true, e.tuple, st);
  });
  width.widest = widest_bracket(r.clock_map());
  auto rows = std::make_shared<NodeRows>(budget, res);
  JoinCounts c = join.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& b) {
        rows->pairs.add({seq, tuple, a.local, b.local, width(a, b)});
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
  LocalWidth width;
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    if (e.channel != from && e.channel != to) return;
    width.add(e);
    JoinStamp st = local_stamp(e);
    if (e.channel == from) join.add(false, e.tuple, st);
    if (e.channel == to) join.add(true, e.tuple, st);
  });
  width.widest = widest_bracket(r.clock_map());
  RunMerge<LocalPair, LocalKey> pairs(budget.share(0.2).bytes, budget.spill_dir());
  JoinCounts c = join.run(
      [&](uint64_t tuple, uint64_t seq, const JoinStamp& a, const JoinStamp& b) {
        pairs.add({seq, tuple, a.local, b.local, width(a, b)});
      },
      [&] { pairs.end_run(); });
  LatencySeries s;
  s.from_channel = r.channel_name(from);
  s.to_channel = r.channel_name(to);
  s.from_node = s.to_node = r.meta().value("node", "");
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
