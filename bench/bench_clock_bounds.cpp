// bench_clock_bounds: how wide the CLOCK_MONOTONIC -> TSC conversion bounds are
// (clock/clock_bounds.h) on simulated clocks, and what a conversion costs.
//
//   bench_clock_bounds [STAMPS per case (default 1000000)]
//
// Each case: 60 s of correlation points every 100 ms (brackets 40-160 ticks at
// 2.1 ticks/ns, RAW read after MONOTONIC), then stamps at random true instants.
// Prints per case: contained N / N, segments that fell back and why, bound width
// median / p99 / max in ns, and ns per conversion; for a TSC rate change, the
// changes found and the median width on each side of it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "clock/clock_map.h"

namespace {

using ld = long double;
constexpr ld kHz = 2.1;
constexpr uint64_t kTsc0 = 1'000'000'000'000'000ull, kMono0 = 7'000'000'000'000ull;

struct Clock {
  ld quantum = 1, step_at = INFINITY, step_ns = 0, rate_at = INFINITY, rate_ppm = 0, toggle_ppm = 0;
  ld ns(ld tsc) const {  // both clocks' ns since start at this TSC (before NTP)
    ld n = (tsc - kTsc0) / kHz;
    if (tsc > rate_at) n -= (tsc - rate_at) / kHz * rate_ppm * 1e-6L;
    return n + (tsc >= step_at ? step_ns : 0);
  }
  // MONOTONIC: +-toggle_ppm every 1.05 s (each change witnessed by a call).
  ld mono(ld tsc) const {
    ld n = ns(tsc), period = 1050e6L, m = 0;
    if (toggle_ppm == 0) return n;
    for (ld t = 0; t < n; t += period)
      m += (std::min(n, t + period) - t) * (1 + (int(t / period) % 2 ? -1 : 1) * toggle_ppm * 1e-6L);
    return m;
  }
  uint64_t q(ld v) const { return uint64_t(std::floor(v / quantum) * quantum); }
};

void run(const char* name, const Clock& c, int stamps) {
  std::mt19937_64 rng(3);
  std::vector<cptrace::ClockPoint> pts;
  std::vector<cptrace::ClockChange> calls;
  for (ld t = 0; t <= 60e9L; t += 100e6L) {
    uint32_t w = 40 + rng() % 120, wr = 40 + rng() % 120;
    uint64_t t1 = kTsc0 + uint64_t(t * kHz), r1 = t1 + w + 30;
    cptrace::ClockPoint p{t1 + w / 2, kMono0 + c.q(c.mono(ld(t1) + ld(rng() % (w + 1)))), w, cptrace::kClockHasRaw};
    p.raw_tsc = r1 + wr / 2, p.raw_width_ticks = wr, p.raw_ns = kMono0 + c.q(c.ns(ld(r1) + ld(rng() % (wr + 1))));
    pts.push_back(p);
  }
  if (c.toggle_ppm != 0)
    for (ld t = 1050e6L; t < 60e9L; t += 1050e6L) {
      uint64_t m = kMono0 + uint64_t(c.mono(kTsc0 + t * kHz));
      calls.push_back({m - 1000, m + 10'000'000});
    }
  cptrace::ClockMap map(pts, calls, cptrace::ClockReading{uint64_t(c.quantum), uint64_t(c.quantum)});
  std::vector<ld> widths;
  uint64_t in = 0;
  ld first = ld(pts.front().tsc), last = ld(pts.back().tsc);
  std::vector<std::pair<ld, uint64_t>> at;
  for (int i = 0; i < stamps; ++i) {
    ld tau = first + (last - first) * ld(rng() % 100000000) / 1e8L;
    at.push_back({tau, kMono0 + c.q(c.mono(tau))});
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<cptrace::TscBounds> bs;
  bs.reserve(at.size());
  for (auto& [tau, m] : at) bs.push_back(map.mono_to_tsc_bounds(m));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < at.size(); ++i) {
    in += ld(bs[i].lo) <= at[i].first && at[i].first <= ld(bs[i].hi);
    widths.push_back(ld(bs[i].hi - bs[i].lo) / kHz);
  }
  // A TSC rate change: the median width on each side of it, to show the rest
  // of the run keeps its tight bounds (raw_witness.h splits the line there).
  std::string sides;
  if (std::isfinite(double(c.rate_at))) {
    std::vector<ld> before, after;
    for (size_t i = 0; i < at.size(); ++i) (at[i].first < c.rate_at ? before : after).push_back(widths[i]);
    auto median = [](std::vector<ld>& v) {
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      return double(v[v.size() / 2]);
    };
    char buf[160];
    snprintf(buf, sizeof buf, "\n  %-34s tsc_rate_changes %llu; median width before the change %.0f ns, after %.0f ns",
             "", (unsigned long long)map.model_stats().tsc_rate_changes, median(before), median(after));
    sides = buf;
  }
  std::sort(widths.begin(), widths.end());
  const cptrace::ClockModelStats& s = map.model_stats();
  printf(
      "  %-34s contained %7llu / %7llu  fell back %3llu of %llu (violated %llu, crowded %llu, departed %llu)  "
      "width median %6.0f p99 %9.0f max %11.0f ns  %.0f ns/conversion%s\n",
      name, (unsigned long long)in, (unsigned long long)widths.size(), (unsigned long long)s.fallback(),
      (unsigned long long)s.segments, (unsigned long long)s.violated, (unsigned long long)s.crowded,
      (unsigned long long)s.departed, double(widths[widths.size() / 2]), double(widths[widths.size() * 99 / 100]),
      double(widths.back()), secs / double(at.size()) * 1e9, sides.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000000;
  Clock quiet;
  run("quiet clock, 1 ns quantum", quiet, n);
  Clock hyperv = quiet;
  hyperv.quantum = 100;
  run("100 ns quantum (Hyper-V TSC page)", hyperv, n);
  Clock acpi = quiet;
  acpi.quantum = 279;
  run("279 ns quantum (acpi_pm)", acpi, n);
  Clock step = quiet;
  step.step_at = kTsc0 + 30e9L * kHz, step.step_ns = 300;
  run("300 ns step, no syscall", step, n);
  Clock rate = quiet;
  rate.rate_at = kTsc0 + 30e9L * kHz, rate.rate_ppm = 30;
  run("TSC rate change of 30 ppm at 30 s", rate, n);
  rate.rate_ppm = 300;
  run("TSC rate change of 300 ppm at 30 s", rate, n);
  Clock toggles = quiet;
  toggles.toggle_ppm = 500;
  run("+-500 ppm every 1.05 s, witnessed", toggles, n);
  return 0;
}
