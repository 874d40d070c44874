// Non-blocking service rates (Beard & Chamberlain) and the exact per-item estimate.
#include "analyze/service_rates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include <fmt/format.h>

#include "tables/csv_util.h"
#include "latency/latency_table.h"

namespace cptrace {

std::vector<double> gaussian_filter(const std::vector<double>& x, double sigma) {
  if (sigma <= 0 || x.empty()) return x;
  int radius = int(std::ceil(3 * sigma));
  std::vector<double> w(size_t(radius) + 1);
  for (int k = 0; k <= radius; ++k) w[size_t(k)] = std::exp(-0.5 * k * k / (sigma * sigma));
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double sum = 0, norm = 0;
    for (int k = -radius; k <= radius; ++k) {
      int64_t j = int64_t(i) + k;
      if (j < 0 || j >= int64_t(x.size())) continue;
      sum += w[size_t(std::abs(k))] * x[size_t(j)];
      norm += w[size_t(std::abs(k))];
    }
    y[i] = sum / norm;
  }
  return y;
}

namespace {

double estimate_of(const std::vector<double>& samples, size_t n, const RateOptions& opt) {
  std::vector<double> f = gaussian_filter(std::vector<double>(samples.begin(), samples.begin() + n), opt.sigma);
  std::sort(f.begin(), f.end());
  return percentile_sorted(f, opt.quantile);
}

constexpr uint64_t kMaxWindows = 10'000'000;

double period_ms_of(const Timeline& tl, uint64_t period) { return tl.ticks_to_s(double(period)) * 1e3; }

// Windows [origin + kT, origin + (k+1)T) that the occupancy never leaves >= 1,
// and the departures in each. Only whole windows inside [origin, end].
void window_samples(const std::vector<QueueItem>& items, const Timeline& tl, uint64_t period, ServiceRate& out,
                    std::vector<double>& samples) {
  struct Step {
    uint64_t ts;
    int d;
  };
  std::vector<Step> steps;
  int64_t q = 0;  // occupancy before the first step
  uint64_t end = tl.end;
  for (const QueueItem& it : items) {
    if (it.arrive)
      steps.push_back({*it.arrive, +1});
    else
      q++;
    if (it.depart) steps.push_back({*it.depart, -1});
    for (auto t : {it.arrive, it.depart})
      if (t && int64_t(*t - end) > 0) end = *t;
  }
  // Arrivals before departures at the same tick: no empty instant between them.
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.ts != b.ts ? a.ts < b.ts : a.d > b.d; });
  uint64_t nwin = (end - tl.origin) / period;
  // One flag and one count per window: refused, like period_ticks(), beyond
  // kMaxWindows, which only events stamped far past the recording can reach.
  if (nwin > kMaxWindows)
    throw std::runtime_error(fmt::format(
        "--period {}: events up to {:.6g} s after the trace start cut it into {} windows (at most {}); some "
        "timestamps lie far outside the recording (`cptrace dump` shows them); choose a longer --period",
        period_ms_of(tl, period), tl.ticks_to_s(double(end - tl.origin)), nwin, kMaxWindows));
  out.windows = nwin;
  std::vector<uint8_t> blocked(nwin, 0);
  std::vector<uint64_t> departs(nwin, 0);
  auto win_of = [&](uint64_t ts) {
    return int64_t(ts - tl.origin) < 0 ? int64_t(-1) : int64_t((ts - tl.origin) / period);
  };
  // Marks the windows that [z0, z1) overlaps (z1 exclusive; empty if z0 == z1).
  auto block = [&](int64_t z0, int64_t z1) {  // as offsets from the origin, may be negative
    if (z1 <= z0 || z1 <= 0) return;
    int64_t w0 = std::max<int64_t>(z0, 0) / int64_t(period), w1 = (z1 - 1) / int64_t(period);
    for (int64_t w = w0; w <= w1 && w < int64_t(nwin); ++w) blocked[size_t(w)] = 1;
  };
  int64_t zero_since = q == 0 ? INT64_MIN / 2 : 0;
  bool empty = q == 0;
  for (const Step& s : steps) {
    int64_t off = int64_t(s.ts - tl.origin);
    if (s.d < 0) {
      int64_t w = win_of(s.ts);
      if (w >= 0 && w < int64_t(nwin)) departs[size_t(w)]++;
    }
    q += s.d;
    if (empty && q > 0) {
      block(zero_since, off);
      empty = false;
    } else if (!empty && q == 0) {
      zero_since = off;
      empty = true;
    }
  }
  if (empty) block(zero_since, int64_t(end - tl.origin) + 1);
  double T = tl.ticks_to_s(double(period));
  for (uint64_t w = 0; w < nwin; ++w)
    if (!blocked[w]) {
      samples.push_back(double(departs[w]) / T);
      out.raw_max = std::max(out.raw_max, samples.back());
    }
  out.nonblocking = samples.size();
}

void beard_chamberlain(const std::vector<double>& samples, const RateOptions& opt, ServiceRate& out) {
  size_t n = samples.size();
  if (n < opt.min_windows || n == 0) {
    out.status = "too few non-blocking windows";
    return;
  }
  double final_est = estimate_of(samples, n, opt);
  for (int tenth = 5; tenth < 10; ++tenth) {
    size_t k = std::max<size_t>(size_t(double(n) * tenth / 10), 1);
    double e = estimate_of(samples, k, opt);
    double dev = final_est > 0 ? std::fabs(e - final_est) / final_est : (e == 0 ? 0 : INFINITY);
    out.drift = std::max(out.drift, dev);
  }
  if (out.drift > opt.tolerance) {
    out.status = "not converged";
    return;
  }
  out.status = "ok";
  out.estimate = final_est;
}

void exact_per_item(std::vector<QueueItem> items, const Timeline& tl, ServiceRate& out) {
  std::erase_if(items, [](const QueueItem& i) { return !i.depart; });
  std::sort(items.begin(), items.end(), [](const QueueItem& a, const QueueItem& b) { return *a.depart < *b.depart; });
  std::vector<double> s;
  std::optional<uint64_t> prev_depart, prev_arrive;
  for (const QueueItem& it : items) {
    if (it.arrive) {
      uint64_t start = prev_depart && *prev_depart > *it.arrive ? *prev_depart : *it.arrive;
      s.push_back(tl.ticks_to_s(double(int64_t(*it.depart - start))));
      if (prev_arrive && *it.arrive < *prev_arrive) out.overtakes++;
      prev_arrive = it.arrive;
    }
    prev_depart = it.depart;
  }
  out.items = s.size();
  if (s.empty()) return;
  double sum = 0;
  for (double x : s) sum += x;
  out.service_mean_s = sum / double(s.size());
  std::sort(s.begin(), s.end());
  out.service_p50_s = percentile_sorted(s, 0.5);
  out.service_p95_s = percentile_sorted(s, 0.95);
  if (out.service_mean_s > 0) out.exact_rate = 1 / out.service_mean_s;
}

}  // namespace

ServiceRate service_rate_of(std::vector<QueueItem> items, const Timeline& tl, uint64_t period, const RateOptions& opt) {
  ServiceRate out;
  out.period_s = tl.ticks_to_s(double(period));
  std::vector<double> samples;
  window_samples(items, tl, period, out, samples);
  beard_chamberlain(samples, opt, out);
  exact_per_item(std::move(items), tl, out);
  return out;
}

ServiceRate service_rate(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to, const RateOptions& opt) {
  uint64_t period = period_ticks(tl, opt.period_ms, "--period");
  std::unordered_map<uint64_t, QueueItem> by_tuple;
  uint64_t dups = 0;
  auto keep = [&](std::optional<uint64_t>& slot, uint64_t ts) {
    if (slot) dups++;
    if (!slot || ts < *slot) slot = ts;  // file order is only roughly time order
  };
  r.for_each_event([&](const TraceEvent& e) {
    if (e.kind != uint8_t(EventKind::User)) return;
    if (e.channel == from) keep(by_tuple[e.tuple].arrive, e.ts);
    if (e.channel == to) keep(by_tuple[e.tuple].depart, e.ts);
  });
  std::vector<QueueItem> items;
  items.reserve(by_tuple.size());
  uint64_t only_from = 0, only_to = 0;
  for (auto& [tuple, it] : by_tuple) {
    only_from += it.arrive && !it.depart;
    only_to += !it.arrive && it.depart;
    items.push_back(it);
  }
  ServiceRate s = service_rate_of(std::move(items), tl, period, opt);
  s.from = r.channel_name(from);
  s.to = r.channel_name(to);
  s.unmatched_from = only_from;
  s.unmatched_to = only_to;
  s.duplicates = dups;
  // No tuple on both sides: the occupancy (every TO "queued before the trace")
  // would be an artefact of a wrong pair, not a queue.
  if (by_tuple.size() == only_from + only_to) {
    s.status = "no tuple id on both channels";
    s.estimate.reset();
  }
  return s;
}

nlohmann::json service_rate_json(const ServiceRate& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"from", s.from},
          {"to", s.to},
          {"period_s", s.period_s},
          {"nonblocking",
           {{"status", s.status},
            {"estimate_per_s", opt(s.estimate)},
            {"windows", s.windows},
            {"nonblocking_windows", s.nonblocking},
            {"drift", s.drift},
            {"raw_max_per_s", s.raw_max}}},
          {"exact",
           {{"items", s.items},
            {"rate_per_s", opt(s.exact_rate)},
            {"service_mean_s", s.service_mean_s},
            {"service_p50_s", s.service_p50_s},
            {"service_p95_s", s.service_p95_s},
            {"overtakes", s.overtakes}}},
          {"unmatched_from", s.unmatched_from},
          {"unmatched_to", s.unmatched_to},
          {"duplicates", s.duplicates}};
}

namespace {

void print_text(const ServiceRate& s, const RateOptions& o) {
  fmt::print("{} -> {}\n", s.from, s.to);
  if (s.estimate)
    fmt::print(
        "  non-blocking rate   {:.3f} items/s  (T={:g} ms, {} of {} windows non-blocking, p{:g} of Gaussian-filtered "
        "samples, drift {:.2f}% <= {:.2f}%)\n",
        *s.estimate, o.period_ms, s.nonblocking, s.windows, o.quantile * 100, s.drift * 100, o.tolerance * 100);
  else
    fmt::print(
        "  non-blocking rate   {}  (T={:g} ms, {} of {} windows non-blocking, need {}; drift {:.2f}%, "
        "tolerance {:.2f}%)\n",
        s.status, o.period_ms, s.nonblocking, s.windows, o.min_windows, s.drift * 100, o.tolerance * 100);
  if (s.exact_rate)
    fmt::print(
        "  exact per item      {:.3f} items/s  (mean service {:.3f} us, p50 {:.3f} us, p95 {:.3f} us, {} items, {} "
        "overtakes)\n",
        *s.exact_rate, s.service_mean_s * 1e6, s.service_p50_s * 1e6, s.service_p95_s * 1e6, s.items, s.overtakes);
  else
    fmt::print("  exact per item      no paired items\n");
  if (s.unmatched_from || s.unmatched_to || s.duplicates)
    fmt::print("  note: {} tuple ids only on {}, {} only on {}, {} repeated\n", s.unmatched_from, s.from,
               s.unmatched_to, s.to, s.duplicates);
}

}  // namespace

int run_rates(const RatesOptions& o) {
  const RateOptions& opt = o.estimator;
  const bool csv = o.output == Output::Csv, json = o.output == Output::Json;
  if (o.pairs.empty()) throw std::runtime_error("name the queue(s) with --pair FROM,TO");
  if (!(opt.quantile > 0 && opt.quantile <= 1))
    throw std::runtime_error(fmt::format("--quantile {}: must be in (0, 1]", opt.quantile));
  if (!(opt.tolerance >= 0)) throw std::runtime_error(fmt::format("--tolerance {}: must be >= 0", opt.tolerance));
  if (!(opt.sigma >= 0)) throw std::runtime_error(fmt::format("--sigma {}: must be >= 0", opt.sigma));
  auto r = open_trace(o.dir);
  Timeline tl = trace_timeline(*r);
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  for (const auto& [from, to] : o.pairs) ids.emplace_back(resolve_channel(*r, from), resolve_channel(*r, to));
  nlohmann::json all = nlohmann::json::array();
  if (csv)
    fmt::print("from,to,status,nonblocking_per_s,windows,nonblocking_windows,drift,exact_per_s,service_mean_s,items\n");
  for (auto [a, b] : ids) {
    ServiceRate s = service_rate(*r, tl, a, b, opt);
    if (json)
      all.push_back(service_rate_json(s));
    else if (csv)
      fmt::print("{},{},{},{},{},{},{:.6f},{},{:.9g},{}\n", csv_field(s.from), csv_field(s.to), s.status,
                 s.estimate ? fmt::format("{:.6f}", *s.estimate) : "", s.windows, s.nonblocking, s.drift,
                 s.exact_rate ? fmt::format("{:.6f}", *s.exact_rate) : "", s.service_mean_s, s.items);
    else
      print_text(s, opt);
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return damaged_trace_exit(*r, "rates cover the events before it");
}

}  // namespace cptrace
