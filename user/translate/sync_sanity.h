// Translation defends its bounds (DESIGN.md, "Safety and trust"): before any bound
// is built on a node pair's MinRTT rounds, the rounds are checked against what real
// clocks can do, so forged or corrupted rounds are refused instead of printed as
// strict bounds.
//
// What the check knows. Each node measured its own TSC frequency against its own
// CLOCK_MONOTONIC_RAW (the correlation stream), so the rate of Y's TSC per tick of
// X's that the two nodes' clocks imply is hz_Y / hz_X. The rounds imply a rate too.
// Their ratio is the rate of Y's RAW clock against X's: RAW is the clocksource
// scaled by a factor fixed at boot, never NTP-adjusted, so this is two crystals
// within about +-100 ppm each. A relative rate beyond kMaxRelativeRatePpm = 500 ppm
// is therefore not a clock: it is a forged, replayed or corrupted round.
//
// Why RAW and not CLOCK_MONOTONIC: NTP clients slew MONOTONIC (chrony changes the
// tick length by up to 10 %), so a TSC rate measured against it is bent by the
// slew and honest rounds looked contradictory. Traces recorded before the points
// carried RAW (Clock frame version 1) fall back to MONOTONIC, and the check says so:
// there a kernel frequency correction (up to 500 ppm) or a tick slew is in the rate.
//
// The test is exact and covers a relation that is not a line: is there ANY clock
// relation y = f(x), linear or not, whose rate stays within the limit around
// hz_Y / hz_X everywhere and that passes every round's causality constraints? With
// rate bounds [s_lo, s_hi] such an f exists iff for every `below` point (x1, y1)
// and `above` point (x2, y2):  y2 - y1 >= s_lo (x2 - x1) when x2 >= x1, and
// y1 - y2 <= s_hi (x1 - x2) when x1 > x2 (the smallest feasible f, the upper
// envelope of the rate-limited cones of the below points, has slopes in
// [s_lo, s_hi] and is feasible iff it passes under every above point). So this
// one test catches a rate beyond the limit over the span, start and stop phases
// that disagree beyond the limit, and hulls that cross in a way no real change of
// rate explains (rounds of two sources that contradict each other), while a real
// non-linear clock (a rate change within the limit) still passes and is split by
// the hull method.
//
// What it cannot catch: rounds forged consistently at a rate within the limit
// (e.g. 200 ppm) with no honest rounds beside them. Two unsynchronized crystals can
// honestly differ that much; only authenticated rounds (--key) stop that.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_format.h"
#include "translate/sync_pairs.h"

namespace cptrace {

constexpr double kMaxRelativeRatePpm = 500;

// A rate as a strict interval (0, 0: unknown).
struct RateInterval {
  long double lo = 0, hi = 0;
  bool raw = false;  // measured against CLOCK_MONOTONIC_RAW (else CLOCK_MONOTONIC)
  bool known() const { return lo > 0 && hi >= lo; }
  long double mid() const { return (lo + hi) / 2; }
};

// A node's TSC ticks per ns of its CLOCK_MONOTONIC_RAW between the correlation
// points nearest to TSC instants `from` and `to` (its first and last points when
// those coincide), widened by both points' bracket widths and 1 ns of clock
// resolution. Against CLOCK_MONOTONIC (raw == false) when a point lacks RAW.
RateInterval stream_rate(const std::vector<ClockPoint>& pts, int64_t from, int64_t to);

struct SyncFinding {
  std::string kind;  // "rate-beyond-limit" or "crossing-not-split"
  std::string pair;  // "A-B"
  std::string message;  // one line naming the pair, the measured ppm and the limit
  double ppm = 0;  // the relative rate the rounds need (0 for crossing-not-split)
  double limit_ppm = kMaxRelativeRatePpm;
  nlohmann::json to_json() const;
  static SyncFinding from_json(const nlohmann::json& j);
};

struct SyncCheck {
  std::string pair;
  RateInterval expected;  // hz_to / hz_from
  std::string not_checked;  // why the rate could not be checked ("" when it was)
  std::string rate_clock_note;  // "" when both rates are against MONOTONIC_RAW, else why not
  // The rate of the one line through all rounds, relative to `expected`, in ppm
  // (lo, hi), when the hulls admit a line.
  std::optional<std::pair<double, double>> line_ppm;
  std::vector<SyncFinding> findings;
  nlohmann::json to_json() const;
};

// Checks the rounds of from -> to (x on from's TSC, y on to's) against the rate
// the two nodes' own frequencies give, within limit_ppm.
SyncCheck check_pair_sync(const std::vector<PairRound>& rounds, const std::string& from, const std::string& to,
                          const RateInterval& from_hz, const RateInterval& to_hz,
                          double limit_ppm = kMaxRelativeRatePpm);

// The ratio method draws ONE line through MinRTT1 and MinRTT2; when the rounds'
// hulls cross (sub_intervals > 1) that line contradicts the rounds between them.
SyncFinding crossing_not_split(const std::string& pair, size_t sub_intervals);

// The error translate and latency stop with (default), and the warning line they
// print when the user accepted the findings (--accept-suspect-sync).
std::string suspect_sync_error(const std::vector<SyncFinding>& f, const std::string& what);
std::string suspect_sync_warning(const SyncFinding& f);

}  // namespace cptrace
