#include "latency/latency_periods.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tables/rank_select.h"

namespace cptrace {

// Magnitudes below 2^-64 s share the key 0; octaves above 2^64 s the top bins.
namespace {
constexpr int kLowExp = -63, kHighExp = 64;
}

int64_t LogBins::key(double x) const {
  double a = std::fabs(x);
  int e = 0;
  double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  if (a == 0 || std::isnan(a) || e < kLowExp) return 0;
  int64_t idx;
  if (std::isinf(a) || e > kHighExp)
    idx = int64_t(kHighExp - kLowExp + 1) * sub_ + 1;  // one past the last octave's bins
  else  // (m - 0.5) * 2 sub is exact: the sub-bin truncates, never rounds up
    idx = int64_t(e - kLowExp) * sub_ + int64_t((m - 0.5) * 2 * sub_) + 1;
  return x < 0 ? -idx : idx;
}

double LogBins::mag_lower(int64_t idx) const {
  int64_t i = idx - 1;
  if (i >= int64_t(kHighExp - kLowExp + 1) * sub_) return std::ldexp(1.0, kHighExp);
  return std::ldexp(0.5 + double(i % sub_) / (2.0 * sub_), int(i / sub_) + kLowExp);
}

double LogBins::mag_upper(int64_t idx) const {
  int64_t i = idx - 1;
  if (i >= int64_t(kHighExp - kLowExp + 1) * sub_) return std::numeric_limits<double>::infinity();
  return std::ldexp(0.5 + double(i % sub_ + 1) / (2.0 * sub_), int(i / sub_) + kLowExp);
}

double LogBins::lower(int64_t k) const {
  if (k == 0) return -std::ldexp(0.5, kLowExp);
  return k > 0 ? mag_lower(k) : -mag_upper(-k);
}

double LogBins::upper(int64_t k) const {
  if (k == 0) return std::ldexp(0.5, kLowExp);
  return k > 0 ? mag_upper(k) : -mag_lower(-k);
}

LatencyPeriods::LatencyPeriods(double t0, double t1, double lo_min, double hi_max)
    : t0_(t0), step_(t1 > t0 ? (t1 - t0) / double(kPeriods) : 1), bins_(kSub), periods_(kPeriods) {
  // The finest bins whose span over [lo_min, hi_max] fits kMaxBins.
  for (int sub = kSub; sub >= 1; sub /= 2) {
    bins_ = LogBins(sub);
    kmin_ = bins_.key(lo_min), kmax_ = bins_.key(hi_max);
    if (kmax_ - kmin_ < kMaxBins) break;
  }
}

size_t LatencyPeriods::period_of(double at_s) const {
  double p = (at_s - t0_) / step_;
  return p <= 0 ? 0 : std::min(kPeriods - 1, size_t(p));
}

size_t LatencyPeriods::bin_of(double x) const {
  // Every lo and hi lies in [lo_min, hi_max], so in [kmin_, kmax_]; only an
  // estimate outside its own bound could fall out, and it is then clamped.
  return size_t(std::clamp(bins_.key(x), kmin_, kmin_ + kMaxBins - 1) - kmin_);
}

void LatencyPeriods::add(const LatencySample& x) {
  Period& p = periods_[period_of(x.at_s)];
  if (p.value.empty()) p.value.assign(size_t(std::min(kmax_ - kmin_ + 1, kMaxBins)), 0), p.lo = p.hi = p.value;
  p.value[bin_of(x.value_s)]++, p.lo[bin_of(x.lo_s)]++, p.hi[bin_of(x.hi_s)]++;
  if (p.n++ == 0) p.vmax = x.value_s, p.lomax = x.lo_s, p.himax = x.hi_s;
  p.vmax = std::max(p.vmax, x.value_s), p.lomax = std::max(p.lomax, x.lo_s), p.himax = std::max(p.himax, x.hi_s);
}

size_t LatencyPeriods::rank_bin(const std::vector<uint32_t>& h, uint64_t k) const {
  uint64_t seen = 0;
  for (size_t b = 0; b < h.size(); ++b)
    if ((seen += h[b]) > k) return b;
  return h.size() - 1;
}

nlohmann::json LatencyPeriods::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < periods_.size(); ++i) {
    const Period& p = periods_[i];
    if (!p.n) continue;
    nlohmann::json j = {{"from_s", t0_ + double(i) * step_}, {"to_s", t0_ + double(i + 1) * step_}, {"count", p.n}};
    for (auto [name, q] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}) {
      uint64_t k = nearest_rank_index(p.n, q);
      int64_t v = kmin_ + int64_t(rank_bin(p.value, k));
      double lo = bins_.lower(kmin_ + int64_t(rank_bin(p.lo, k)));
      double hi = bins_.upper(kmin_ + int64_t(rank_bin(p.hi, k)));
      double mid = (bins_.lower(v) + bins_.upper(v)) / 2;
      j[std::string(name) + "_s"] = std::clamp(std::isfinite(mid) ? mid : bins_.lower(v), lo, hi);
      j[std::string(name) + "_lo_s"] = lo;
      j[std::string(name) + "_hi_s"] = hi;
    }
    j["max_s"] = p.vmax, j["max_lo_s"] = p.lomax, j["max_hi_s"] = p.himax;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace cptrace
