// MinRTT rounds against physics: the rate-limited feasibility test of sync_sanity.h.
#include "translate/sync_sanity.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "translate/hull_sync.h"

namespace cptrace {
namespace {

// One causality constraint of one round, relative to a base point so that long
// double holds every coordinate exactly (differences of 62-bit stamps).
struct Tagged {
  long double x = 0, y = 0;
  size_t round = 0;
  bool below = false;
};

std::vector<Tagged> tagged_constraints(const std::vector<PairRound>& rounds) {
  std::vector<Tagged> t;
  if (rounds.empty()) return t;
  Constraints first = round_constraints({rounds.front()});
  const Pt base = first.below.front();
  for (size_t i = 0; i < rounds.size(); ++i) {
    Constraints c = round_constraints({rounds[i]});  // the one place that knows a round's two constraints
    for (const Pt& p : c.below) t.push_back({(long double)(p.x - base.x), (long double)(p.y - base.y), i, true});
    for (const Pt& p : c.above) t.push_back({(long double)(p.x - base.x), (long double)(p.y - base.y), i, false});
  }
  return t;
}

// The worst violation of the pairwise conditions, if any: a below and an above
// constraint that no rate-limited relation passes both.
struct Violation {
  long double ticks = 0;  // by how much the above point lies under the cone of the below one
  Tagged below, above;
  size_t count = 0;  // above constraints under some below constraint's cone
};

std::optional<Violation> worst_violation(std::vector<Tagged> t, long double s_lo, long double s_hi) {
  std::optional<Violation> v;
  std::vector<bool> violated;  // per round: its above constraint (one per round)
  auto note = [&](long double ticks, const Tagged& b, const Tagged& a) {
    if (violated.size() <= a.round) violated.resize(a.round + 1);
    violated[a.round] = true;
    if (!v || ticks > v->ticks) v = Violation{ticks, b, a, 0};
  };
  std::sort(t.begin(), t.end(), [](const Tagged& a, const Tagged& b) { return a.x < b.x; });
  // Groups of equal x, left to right: every below point at or before x2 pushes
  // f(x2) up at a rate of at least s_lo (at equal x: received before it was sent).
  long double best = -INFINITY;
  Tagged arg;
  for (size_t s = 0, e; s < t.size(); s = e) {
    for (e = s; e < t.size() && t[e].x == t[s].x; ++e)
      if (t[e].below && t[e].y - s_lo * t[e].x > best) {
        best = t[e].y - s_lo * t[e].x;
        arg = t[e];
      }
    for (size_t k = s; k < e; ++k)
      if (!t[k].below && best > -INFINITY && t[k].y - s_lo * t[k].x < best)
        note(best - (t[k].y - s_lo * t[k].x), arg, t[k]);
  }
  // Right to left: every below point strictly after x2 bounds f(x2) from below, as
  // f cannot have climbed faster than s_hi since x2.
  best = -INFINITY;
  for (size_t e = t.size(), s; e > 0; e = s) {
    for (s = e; s > 0 && t[s - 1].x == t[e - 1].x; --s) {
    }
    for (size_t k = s; k < e; ++k)
      if (!t[k].below && best > -INFINITY && t[k].y - s_hi * t[k].x < best)
        note(best - (t[k].y - s_hi * t[k].x), arg, t[k]);
    for (size_t k = s; k < e; ++k)
      if (t[k].below && t[k].y - s_hi * t[k].x > best) {
        best = t[k].y - s_hi * t[k].x;
        arg = t[k];
      }
  }
  if (v) v->count = size_t(std::count(violated.begin(), violated.end(), true));
  return v;
}

std::string describe(const PairRound& r, const std::string& from, const std::string& to) {
  return fmt::format("round seq {} ({}, initiated by {})", r.seq, r.phase, r.x_initiated ? from : to);
}

}  // namespace

RateInterval stream_rate(const std::vector<ClockPoint>& pts, int64_t from, int64_t to) {
  if (pts.size() < 2) return {};
  auto nearest = [&](int64_t t) {
    return *std::min_element(pts.begin(), pts.end(), [t](const ClockPoint& a, const ClockPoint& b) {
      return std::llabs(int64_t(a.tsc) - t) < std::llabs(int64_t(b.tsc) - t);
    });
  };
  ClockPoint p1 = nearest(from), p2 = nearest(to);
  if (p2.tsc <= p1.tsc || p2.mono_ns <= p1.mono_ns + 2) {
    p1 = pts.front();
    p2 = pts.back();
  }
  if (p2.tsc <= p1.tsc || p2.mono_ns <= p1.mono_ns + 2) return {};
  // The RAW brackets of the same two points when both have them (see the header).
  bool raw = p1.has_raw() && p2.has_raw() && p2.raw_tsc > p1.raw_tsc && p2.raw_ns > p1.raw_ns + 2;
  uint64_t t1 = raw ? p1.raw_tsc : p1.tsc, t2 = raw ? p2.raw_tsc : p2.tsc;
  uint64_t n1 = raw ? p1.raw_ns : p1.mono_ns, n2 = raw ? p2.raw_ns : p2.mono_ns;
  uint32_t w1 = raw ? p1.raw_width_ticks : p1.width_ticks, w2 = raw ? p2.raw_width_ticks : p2.width_ticks;
  long double dt = (long double)(t2 - t1), dm = (long double)(n2 - n1);
  long double w = (long double)(w1 + w2) / 2 + 2;
  if (dt <= w) return {};
  return {(dt - w) / (dm + 1), (dt + w) / (dm - 1), raw};
}

nlohmann::json SyncFinding::to_json() const {
  return {{"kind", kind}, {"pair", pair}, {"message", message}, {"ppm", ppm}, {"limit_ppm", limit_ppm}};
}

SyncFinding SyncFinding::from_json(const nlohmann::json& j) {
  SyncFinding f;
  f.kind = j.value("kind", "");
  f.pair = j.value("pair", "");
  f.message = j.value("message", "");
  // An infinite ppm (two rounds contradicting each other at one instant) is null in JSON.
  f.ppm = j.contains("ppm") && j["ppm"].is_number() ? j["ppm"].get<double>() : INFINITY;
  f.limit_ppm = j.value("limit_ppm", kMaxRelativeRatePpm);
  return f;
}

nlohmann::json SyncCheck::to_json() const {
  nlohmann::json j = {{"pair", pair}, {"limit_ppm", kMaxRelativeRatePpm}};
  if (expected.known()) j["expected_rate"] = {double(expected.lo), double(expected.hi)};
  if (!not_checked.empty()) j["not_checked"] = not_checked;
  if (expected.known()) j["rate_clock"] = expected.raw ? "monotonic_raw" : "monotonic";
  if (!rate_clock_note.empty()) j["rate_clock_note"] = rate_clock_note;
  if (line_ppm) j["line_rate_ppm"] = {line_ppm->first, line_ppm->second};
  j["findings"] = nlohmann::json::array();
  for (const SyncFinding& f : findings) j["findings"].push_back(f.to_json());
  return j;
}

SyncCheck check_pair_sync(const std::vector<PairRound>& rounds, const std::string& from, const std::string& to,
                          const RateInterval& from_hz, const RateInterval& to_hz, double limit_ppm) {
  SyncCheck c;
  c.pair = from + "-" + to;
  if (rounds.empty()) return c;
  if (!from_hz.known() || !to_hz.known()) {
    c.not_checked = fmt::format("{} has fewer than two clock-correlation points: its TSC frequency is unknown",
                                from_hz.known() ? to : from);
    return c;
  }
  c.expected = {to_hz.lo / from_hz.hi, to_hz.hi / from_hz.lo, from_hz.raw && to_hz.raw};
  if (!c.expected.raw)
    c.rate_clock_note = fmt::format(
        "{} measured against CLOCK_MONOTONIC (no CLOCK_MONOTONIC_RAW in the correlation points: a trace from an "
        "older recorder): an NTP slew of that clock during the rounds can make honest rounds look contradictory",
        !from_hz.raw && !to_hz.raw ? fmt::format("{}'s and {}'s TSC rates are", from, to)
                                   : fmt::format("{}'s TSC rate is", from_hz.raw ? to : from));
  const long double L = limit_ppm * 1e-6L;
  auto ppm = [&](long double rate) { return double((rate / c.expected.mid() - 1) * 1e6L); };

  // The line through all rounds, for the record (when the hulls admit one).
  Constraints all = round_constraints(rounds);
  HullFit fit = fit_hulls(all.below, all.above);
  if (fit.status == HullStatus::Feasible) {
    auto slope = [](const Line& l) { return (long double)(l.b.y - l.a.y) / (long double)(l.b.x - l.a.x); };
    c.line_ppm = {{double((slope(fit.lines.lines[fit.lines.min_slope]) / c.expected.hi - 1) * 1e6L),
                   double((slope(fit.lines.lines[fit.lines.max_slope]) / c.expected.lo - 1) * 1e6L)}};
  }

  std::vector<Tagged> t = tagged_constraints(rounds);
  auto v = worst_violation(t, c.expected.lo * (1 - L), c.expected.hi * (1 + L));
  if (!v) return c;
  const Tagged* b = &v->below;
  const Tagged* a = &v->above;
  const size_t rb = b->round, ra = a->round;
  SyncFinding f;
  f.kind = "rate-beyond-limit";
  f.pair = from + "-" + to;
  f.limit_ppm = limit_ppm;
  std::string need;
  long double dx = a->x - b->x;
  if (dx == 0) {
    f.ppm = b->y > a->y ? INFINITY : -INFINITY;
    need = "contradict each other at one instant";
  } else {
    // x2 > x1: the rate must be at most (y2 - y1) / (x2 - x1); x1 > x2: at least that.
    long double rate = (a->y - b->y) / dx;
    f.ppm = ppm(rate);
    need = fmt::format("{:.3f} s apart on {}'s clock, need a rate {} {:+.1f} ppm", double(std::fabs(dx) / 1e9L), from,
                       dx > 0 ? "of at most" : "of at least", f.ppm);
  }
  f.message = fmt::format(
      "{}-{}: MinRTT rounds contradict the nodes' own clocks: {} and {} {} relative to the {}/{} rate their own "
      "measured TSC frequencies give (limit +-{:.0f} ppm; {} of {} rounds violate it, the worst by {:.0f} ticks) — "
      "forged, replayed or corrupted rounds, or a clock that is not an invariant TSC",
      from, to, describe(rounds[rb], from, to), describe(rounds[ra], from, to), need, to, from, limit_ppm, v->count,
      rounds.size(), double(v->ticks));
  c.findings.push_back(f);
  return c;
}

SyncFinding crossing_not_split(const std::string& pair, size_t sub_intervals) {
  SyncFinding f;
  f.kind = "crossing-not-split";
  f.pair = pair;
  f.message = fmt::format(
      "{}: the rounds' convex hulls cross (no single clock line satisfies them; the hull method splits the span into "
      "{} sub-intervals) but the ratio method draws one line through MinRTT1 and MinRTT2 over the whole span — use "
      "--method hull or best",
      pair, sub_intervals);
  return f;
}

std::string suspect_sync_error(const std::vector<SyncFinding>& fs, const std::string& what) {
  std::string s = what + ": refusing to print bounds built on MinRTT rounds that contradict each other or physics:";
  for (const SyncFinding& f : fs) s += "\n  " + f.message;
  s += "\n(pass --accept-suspect-sync to print them anyway, marked as NOT guaranteed)";
  return s;
}

std::string suspect_sync_warning(const SyncFinding& f) {
  return "WARNING suspect sync (accepted with --accept-suspect-sync), bounds through " + f.pair +
         " NOT guaranteed: " + f.message;
}

}  // namespace cptrace
