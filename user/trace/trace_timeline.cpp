// Opening a trace for analysis, its timeline, channel lookup, period checks.
#include "trace/trace_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "cptrace.h"  // cp_channel_id
#include "os/say.h"

namespace cptrace {

namespace fs = std::filesystem;

std::unique_ptr<TraceReader> open_trace(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw std::runtime_error(dir + ": no such file or directory");
  if (fs::is_directory(dir, ec) && !fs::exists(fs::path(dir) / "events.cpt", ec))
    throw std::runtime_error(dir + ": not a cptrace trace directory (no events.cpt in it)");
  return std::make_unique<TraceReader>(dir);
}

int damaged_trace_exit(const TraceReader& r, std::string_view covered) {
  if (!r.error()) return 0;
  std::fflush(stdout);
  say("{} ({})", r.error()->what(), covered);
  return 2;
}

Timeline trace_timeline(const TraceReader& r) {
  return trace_timeline(r.trace_meta(), r.clock(), r.clock_map(), r.events_path());
}

Timeline trace_timeline(const TraceMeta& m, const std::vector<ClockPoint>& pts, const ClockMap& map,
                        const std::string& path) {
  Timeline t;
  if (m.tsc_hz > 0) {
    t.hz = m.tsc_hz;
    t.hz_source = "meta.json tsc_hz";
  } else if (map.tsc_hz() > 0) {
    t.hz = map.tsc_hz();
    t.hz_source = fmt::format("correlation stream ({} points)", map.points().size());
  } else {
    throw std::runtime_error(path +
                             ": no TSC frequency (meta.json has no tsc_hz and fewer than two correlation points)");
  }
  t.origin = m.start.tsc.value_or(0);
  if (!t.origin && !pts.empty()) t.origin = pts.front().tsc;
  t.end = m.stop.tsc.value_or(0);
  for (const ClockPoint& p : pts) t.end = std::max(t.end, p.tsc);
  if (!t.origin) throw std::runtime_error(path + ": no trace start (no meta.json start and no correlation point)");
  t.end = std::max(t.end, t.origin);
  return t;
}

uint64_t resolve_channel(const TraceReader& r, const std::string& name) {
  // The full name first: its hash is the id, even where the trace holds only the
  // recorder's truncated copy of the name.
  if (r.channels().count(cp_channel_id(name.c_str()))) return cp_channel_id(name.c_str());
  std::vector<std::string> names;
  for (const auto& [id, c] : r.channels()) {
    std::string label = r.channel_name(id);
    if (label == name || fmt::format("0x{:016x}", id) == name || fmt::format("0x{:x}", id) == name) return id;
    names.push_back(label);
  }
  std::sort(names.begin(), names.end());
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw std::runtime_error(
      fmt::format("unknown channel '{}' (channels in {}: {})", name, r.events_path(), known.empty() ? "none" : known));
}

uint64_t period_ticks(const Timeline& t, double period_ms, const std::string& flag, uint64_t max_periods) {
  if (!std::isfinite(period_ms) || period_ms <= 0)
    throw std::runtime_error(fmt::format("{} {}: must be a positive number of milliseconds", flag, period_ms));
  double ticks = std::round(period_ms * 1e-3 * t.hz);
  if (ticks < 1)
    throw std::runtime_error(fmt::format("{} {}: shorter than one TSC tick ({:.3f} GHz)", flag, period_ms, t.hz / 1e9));
  if (ticks > 9e18) throw std::runtime_error(fmt::format("{} {}: too long", flag, period_ms));
  uint64_t p = uint64_t(ticks);
  uint64_t n = (t.end - t.origin) / p + 1;
  if (n > max_periods)
    throw std::runtime_error(fmt::format("{} {}: cuts the {:.3f} s trace into {} periods (at most {})", flag, period_ms,
                                         t.seconds(t.end), n, max_periods));
  return p;
}

}  // namespace cptrace
