// What changed in the clock's discipline during a recording (clock_adjust_summary.h).
#include "analyze/clock_adjust_summary.h"
#include "os/time_units.h"

#include <algorithm>

#include <fmt/format.h>

namespace cptrace {
namespace {

// The fields of `now` that differ from `before`, in words.
std::string state_change(const NtpState& before, const NtpState& now) {
  std::vector<std::string> d;
  if (before.freq != now.freq)
    d.push_back(fmt::format("frequency {:+.3f} -> {:+.3f} ppm", before.freq_ppm(), now.freq_ppm()));
  if (before.tick != now.tick)
    d.push_back(fmt::format("tick {} -> {} µs ({:+.0f} ppm)", before.tick, now.tick, now.tick_ppm()));
  if (before.synchronised() != now.synchronised()) d.push_back(now.synchronised() ? "synchronised" : "unsynchronised");
  if (before.pll() != now.pll() || before.fll() != now.fll())
    d.push_back(now.fll() ? "FLL" : now.pll() ? "PLL" : "PLL/FLL off");
  if (before.slewing() != now.slewing() || (now.slewing() && before.offset_ns() != now.offset_ns()))
    d.push_back(now.slewing() ? fmt::format("offset {} ns being slewed", now.offset_ns() + now.adjtime_left_us * 1000)
                              : std::string("no offset being slewed"));
  if (d.empty()) d.push_back("status/error estimates only");
  std::string s = d[0];
  for (size_t i = 1; i < d.size(); ++i) s += ", " + d[i];
  return s;
}

}  // namespace

nlohmann::json ClockAdjustSummary::to_json() const {
  nlohmann::json j = {{"state_at_start", state_at_start}, {"changes", nlohmann::json::array()}};
  for (const auto& c : changes)
    j["changes"].push_back(
        {{"at_s", c.at_s}, {"mono_ns", c.mono_ns}, {"tsc", c.tsc}, {"kind", c.kind}, {"text", c.text}});
  return j;
}

ClockAdjustSummary summarize_clock_adjustments(const TraceReader& r) {
  ClockAdjustSummary s;
  uint64_t origin = r.clock().empty() ? 0 : r.clock().front().mono_ns;
  for (const ClockPoint& p : r.clock()) origin = std::min(origin, p.mono_ns);
  std::vector<ClockAdjustment> all = r.clock_adjustments();
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.mono_ns < b.mono_ns; });
  const NtpState* last = nullptr;
  for (const ClockAdjustment& a : all) {
    ClockAdjustLine l{ns_to_seconds(double(a.mono_ns) - double(origin)), a.mono_ns, a.tsc, "", ""};
    switch (a.kind) {
      case ClockAdjustKind::Syscall:
        if (!a.adjusting()) continue;
        l.kind = "syscall";
        l.text = a.describe();
        break;
      case ClockAdjustKind::State:
        if (!last) {
          s.state_at_start = a.state.describe();
          last = &a.state;
          continue;
        }
        l.kind = "state";
        l.text = "NTP state: " + state_change(*last, a.state);
        last = &a.state;
        break;
      case ClockAdjustKind::Step:
        l.kind = "step";
        l.text = a.describe();
        break;
    }
    s.changes.push_back(l);
  }
  return s;
}

}  // namespace cptrace
