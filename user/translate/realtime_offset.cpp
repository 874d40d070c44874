// The nodes' CLOCK_REALTIME offsets through the translation (realtime_offset.h).
#include "translate/realtime_offset.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace cptrace {
namespace {

// The reference's CLOCK_MONOTONIC over a TSC interval [x_lo, x_hi], as a strict
// interval: at least the largest m whose TSC is surely <= x_lo, at most the
// smallest m whose TSC is surely >= x_hi. Binary search over the model's
// bounds, each answer checked (the bounds need not be exactly monotonic).
std::optional<std::pair<int64_t, int64_t>> ref_mono(const ClockMap& map, int64_t x_lo, int64_t x_hi) {
  const auto& pts = map.points();
  int64_t first = int64_t(pts.front().mono_ns), last = int64_t(pts.back().mono_ns);
  auto hi_of = [&](int64_t m) { return int64_t(map.mono_to_tsc_bounds(uint64_t(m)).hi); };
  auto lo_of = [&](int64_t m) { return int64_t(map.mono_to_tsc_bounds(uint64_t(m)).lo); };
  if (hi_of(first) > x_lo || lo_of(last) < x_hi) return std::nullopt;  // outside the stream
  int64_t a = first, b = last;  // hi_of(a) <= x_lo
  while (b - a > 1) {
    int64_t mid = a + (b - a) / 2;
    (hi_of(mid) <= x_lo ? a : b) = mid;
  }
  int64_t c = first, d = last;  // lo_of(d) >= x_hi
  while (d - c > 1) {
    int64_t mid = c + (d - c) / 2;
    (lo_of(mid) >= x_hi ? d : c) = mid;
  }
  if (hi_of(a) > x_lo || lo_of(d) < x_hi || a > d) return std::nullopt;
  return std::pair{a, d};
}

// The reference's REALTIME - MONOTONIC around mono instants [m_lo, m_hi]: the
// intersection of its neighbouring points' intervals; none when they disagree
// (a step between them) or lack REALTIME.
std::optional<std::pair<int64_t, int64_t>> ref_offset(const std::vector<ClockPoint>& pts, int64_t m_lo, int64_t m_hi) {
  auto it = std::upper_bound(pts.begin(), pts.end(), uint64_t(m_lo),
                             [](uint64_t v, const ClockPoint& p) { return v < p.mono_ns; });
  if (it == pts.begin() || it == pts.end()) return std::nullopt;
  const ClockPoint &p = *(it - 1), &q = *it;
  if (!p.has_realtime() || !q.has_realtime() || int64_t(q.mono_ns) < m_hi) return std::nullopt;
  int64_t lo = std::max(p.rt_minus_mono_ns, q.rt_minus_mono_ns);
  int64_t hi = std::min(p.rt_minus_mono_ns + int64_t(p.rt_width_ns), q.rt_minus_mono_ns + int64_t(q.rt_width_ns));
  if (lo > hi) return std::nullopt;
  return std::pair{lo, hi};
}

}  // namespace

RealtimeOffset measure_realtime_offset(const std::string& node, const std::vector<ClockPoint>& node_pts,
                                       const Relation& to_ref, const std::string& reference, const ClockMap& ref_map) {
  RealtimeOffset r;
  r.node = node, r.reference = reference;
  std::vector<int64_t> widths;
  for (const ClockPoint& p : node_pts) {
    if (!p.has_realtime()) continue;
    int64_t t1 = int64_t(p.tsc - p.width_ticks / 2), t2 = t1 + int64_t(p.width_ticks);
    auto mono = ref_mono(ref_map, to_ref.at(t1).lo, to_ref.at(t2).hi);
    auto off = mono ? ref_offset(ref_map.points(), mono->first, mono->second) : std::nullopt;
    if (!off) {
      r.skipped++;
      continue;
    }
    // This node's REALTIME at its reading (1 ns resolution), and the reference's.
    int64_t v_lo = int64_t(p.mono_ns) + p.rt_minus_mono_ns, v_hi = v_lo + int64_t(p.rt_width_ns) + 1;
    int64_t r_lo = mono->first + off->first, r_hi = mono->second + off->second + 1;
    int64_t lo = v_lo - r_hi, hi = v_hi - r_lo;
    r.lo_min = r.samples ? std::min(r.lo_min, lo) : lo;
    r.hi_max = r.samples ? std::max(r.hi_max, hi) : hi;
    if (lo > 0 || hi < 0) r.at_least_ns = std::max(r.at_least_ns, lo > 0 ? lo : -hi);
    widths.push_back(hi - lo);
    r.samples++;
  }
  if (!widths.empty()) {
    std::sort(widths.begin(), widths.end());
    r.widest_ns = widths.back();
    r.median_width_ns = widths[widths.size() / 2];
  }
  return r;
}

nlohmann::json RealtimeOffset::to_json() const {
  return {{"node", node},
          {"reference", reference},
          {"samples", samples},
          {"skipped", skipped},
          {"offset_lo_ns", lo_min},
          {"offset_hi_ns", hi_max},
          {"widest_ns", widest_ns},
          {"median_width_ns", median_width_ns},
          {"at_least_ns", at_least_ns}};
}

RealtimeOffset RealtimeOffset::from_json(const nlohmann::json& j) {
  RealtimeOffset r;
  r.node = j.value("node", ""), r.reference = j.value("reference", "");
  r.samples = j.value("samples", uint64_t(0)), r.skipped = j.value("skipped", uint64_t(0));
  r.lo_min = j.value("offset_lo_ns", int64_t(0)), r.hi_max = j.value("offset_hi_ns", int64_t(0));
  r.widest_ns = j.value("widest_ns", int64_t(0)), r.median_width_ns = j.value("median_width_ns", int64_t(0));
  r.at_least_ns = j.value("at_least_ns", int64_t(0));
  return r;
}

std::string RealtimeOffset::describe() const {
  if (samples == 0)
    return fmt::format("CLOCK_REALTIME {} - {}: not measured (no correlation point with REALTIME maps onto {})", node,
                       reference, reference);
  return fmt::format(
      "CLOCK_REALTIME {} - {}: between {:+.3f} and {:+.3f} ms over the run ({} samples, each within {:.1f} us, "
      "median {:.1f} us){}",
      node, reference, lo_min / 1e6, hi_max / 1e6, samples, widest_ns / 1e3, median_width_ns / 1e3,
      at_least_ns ? fmt::format("; apart by at least {:.1f} us at some instant", at_least_ns / 1e3) : "");
}

}  // namespace cptrace
