// Events per period per channel, one pass over the trace.
#include "analyze/throughput.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "analyze/net_throughput.h"
#include "tables/csv_util.h"

namespace cptrace {

void refuse_throughput_span(const Timeline& tl, uint64_t period, double period_ms, int64_t lo, int64_t hi) {
  double p_s = tl.ticks_to_s(double(period));
  double span_ms = (double(hi) - double(lo) + 1) * p_s * 1e3;
  throw TooManyPeriods(
      fmt::format("--period {}: the events span {:.6g} s ({:.6g} s to {:.6g} s from the trace start), {} periods "
                  "(at most {}); some timestamps lie far outside the recording (`cptrace dump` shows them); "
                  "choose a longer --period",
                  period_ms, span_ms / 1e3, double(lo) * p_s, (double(hi) + 1) * p_s, periods_between(lo, hi),
                  kMaxThroughputPeriods),
      span_ms);
}

bool PeriodBins::add(int64_t idx, uint64_t n) {
  if (counts.empty()) first = idx;
  int64_t last = first + int64_t(counts.size()) - 1;
  if (periods_between(std::min(first, idx), std::max(last, idx)) > kMaxThroughputPeriods) return false;
  if (idx < first) {
    counts.insert(counts.begin(), size_t(first - idx), 0);
    first = idx;
  }
  if (size_t(idx - first) >= counts.size()) counts.resize(size_t(idx - first) + 1, 0);
  counts[size_t(idx - first)] += n;
  return true;
}

void ThroughputCounter::add(const Timeline& tl, uint64_t period, const TraceEvent& e) {
  if (e.kind != uint8_t(EventKind::User) || (only_ && e.channel != *only_)) return;
  add_at(e.channel, period_index(tl, e.ts, period));
}

void ThroughputCounter::add_at(uint64_t channel, int64_t idx, uint64_t n) {
  bins_[channel].add(idx, n);
  lo_ = std::min(lo_, idx), hi_ = std::max(hi_, idx);
}

void ThroughputCounter::merge(const ThroughputCounter& other) {
  for (const auto& [id, b] : other.bins_) {
    bins_.try_emplace(id);
    for (size_t i = 0; i < b.counts.size(); ++i)
      if (b.counts[i]) bins_[id].add(b.first + int64_t(i), b.counts[i]);
  }
  lo_ = std::min(lo_, other.lo_), hi_ = std::max(hi_, other.hi_);
}

Throughput ThroughputCounter::table(const Timeline& tl, uint64_t period, double period_ms,
                                    const std::map<uint64_t, ChannelInfo>& channels) const {
  std::map<uint64_t, PeriodBins> bins = bins_;
  if (!only_)
    for (const auto& [id, c] : channels) bins.try_emplace(id);
  else
    bins.try_emplace(*only_);
  Throughput t;
  t.tl = tl;
  t.period = period;
  t.period_ms = period_ms;
  int64_t lo = lo_, hi = std::max(hi_, period_index(tl, tl.end, period));
  for (const auto& [id, b] : bins)
    if (!b.counts.empty()) {
      lo = std::min(lo, b.first);
      hi = std::max(hi, b.first + int64_t(b.counts.size()) - 1);
    }
  if (periods_between(lo, hi) > kMaxThroughputPeriods) refuse_throughput_span(tl, period, period_ms, lo, hi);
  t.first = lo;
  t.periods = size_t(hi - lo + 1);
  for (auto& [id, b] : bins) {
    ChannelSeries s{id, channel_label(channels, id), std::vector<uint64_t>(t.periods, 0), 0};
    for (size_t i = 0; i < b.counts.size(); ++i) {
      s.counts[size_t(b.first - lo) + i] = b.counts[i];
      s.total += b.counts[i];
    }
    t.channels.push_back(std::move(s));
  }
  std::sort(t.channels.begin(), t.channels.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return t;
}

Throughput compute_throughput(const TraceReader& r, const Timeline& tl, uint64_t period, double period_ms,
                              std::optional<uint64_t> only) {
  ThroughputCounter c(only);
  r.for_each_event([&](const TraceEvent& e) { c.add(tl, period, e); });
  return c.table(tl, period, period_ms, r.channels());
}

nlohmann::json throughput_json(const Throughput& t) {
  nlohmann::json j = {{"period_ms", t.period_ms},           {"period_ticks", t.period}, {"tsc_hz", t.tl.hz},
                      {"origin_tsc", t.tl.origin},          {"first_period", t.first},  {"periods", t.periods},
                      {"channels", nlohmann::json::array()}};
  for (const auto& c : t.channels)
    j["channels"].push_back({{"name", c.name}, {"id", c.id}, {"total", c.total}, {"counts", c.counts}});
  return j;
}

namespace {

void print_text(const Throughput& t) {
  fmt::print("# events per {:g} ms period, periods aligned to the trace start (TSC {}, {:.6f} GHz)\n", t.period_ms,
             t.tl.origin, t.tl.hz / 1e9);
  fmt::print("{:>12}", "start_s");
  for (const auto& c : t.channels) fmt::print(" {:>14}", c.name);
  fmt::print("\n");
  for (size_t i = 0; i < t.periods; ++i) {
    fmt::print("{:12.6f}", t.period_start_s(i));
    for (const auto& c : t.channels) fmt::print(" {:14}", c.counts[i]);
    fmt::print("\n");
  }
  fmt::print("{:>12}", "total");
  for (const auto& c : t.channels) fmt::print(" {:14}", c.total);
  fmt::print("\n");
}

void print_csv(const Throughput& t) {
  fmt::print("period,start_s,channel,events\n");
  for (size_t i = 0; i < t.periods; ++i)
    for (const auto& c : t.channels)
      fmt::print("{},{:.9f},{},{}\n", t.first + int64_t(i), t.period_start_s(i), csv_field(c.name), c.counts[i]);
}

int channel_throughput(const std::string& dir, const std::string& channel, double period_ms, Output output) {
  auto r = open_trace(dir);
  Timeline tl = trace_timeline(*r);
  std::optional<uint64_t> only;
  if (!channel.empty()) only = resolve_channel(*r, channel);
  Throughput t = compute_throughput(*r, tl, period_ticks(tl, period_ms, "--period"), period_ms, only);
  if (output == Output::Json)
    fmt::print("{}\n", throughput_json(t).dump(2));
  else if (output == Output::Csv)
    print_csv(t);
  else
    print_text(t);
  return damaged_trace_exit(*r, "counts cover the events before it");
}

}  // namespace

int run_throughput(const ThroughputOptions& o) {
  if (o.net) {
    // Network series are per connection, not per channel: there is nothing to select.
    if (!o.channel.empty()) throw std::runtime_error("--net and --channel exclude each other");
    return run_net_throughput(o.dir, o.period_ms, o.output);
  }
  return channel_throughput(o.dir, o.channel, o.period_ms, o.output);
}

}  // namespace cptrace
