// Instants of possible clock-rate changes (clock_change_candidates.h).
#include "clock/clock_change_candidates.h"
#include "os/time_units.h"

#include <sys/timex.h>

#include <algorithm>

namespace cptrace {
namespace {

constexpr int64_t kSecond = kNsPerSecond;

__int128 floor_div128(__int128 a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Spans of CLOCK_MONOTONIC during which the recorded NTP state shows a slew.
std::vector<std::pair<uint64_t, uint64_t>> slewing_spans(const ClockHistory& h) {
  const auto& pts = h.points;
  uint64_t end_of_trace = pts.empty() ? 0 : pts.back().mono_ns;
  std::vector<const ClockAdjustment*> states;
  for (const auto& a : h.adjustments)
    if (a.kind == ClockAdjustKind::State) states.push_back(&a);
  std::stable_sort(states.begin(), states.end(), [](auto* a, auto* b) { return a->mono_ns < b->mono_ns; });
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (size_t i = 0; i < states.size(); ++i) {
    if (!states[i]->state.slewing() || (i > 0 && states[i - 1]->state.slewing())) continue;
    // The slew began after the last point before this state's reading.
    auto it = std::lower_bound(pts.begin(), pts.end(), states[i]->mono_ns,
                               [](const ClockPoint& p, uint64_t m) { return p.mono_ns < m; });
    uint64_t from = it == pts.begin()
                        ? (pts.empty() ? states[i]->mono_ns : std::min(pts.front().mono_ns, states[i]->mono_ns))
                        : std::prev(it)->mono_ns;
    uint64_t to = std::max(end_of_trace, states[i]->mono_ns);
    for (size_t k = i + 1; k < states.size(); ++k)
      if (!states[k]->state.slewing()) {
        to = states[k]->mono_ns;
        break;
      }
    spans.push_back({from, to});
  }
  return spans;
}

// The second boundaries of one offset inside [from, to], at most three per gap
// between consecutive correlation points: the first two and the last. The model
// only asks whether a three-segment window (reaching kMarkEffectNs, under a
// second, into the gap before it) holds two or more marks, so more marks per gap
// change no answer; and a damaged trace whose points span centuries costs no more
// than its points.
void boundaries_per_gap(std::span<const ClockPoint> pts, uint64_t from, uint64_t to, int64_t off,
                        std::vector<uint64_t>& out) {
  using i128 = __int128;
  auto gap = [&](uint64_t a, uint64_t b) {
    if (a > b) return;
    i128 first = floor_div128(i128(a) + off - 1, kSecond) + 1, last = floor_div128(i128(b) + off, kSecond);
    for (i128 s : {first, first + 1, last}) {
      i128 m = s * kSecond - off;
      if (s >= first && s <= last && m >= i128(a) && m <= i128(b)) out.push_back(uint64_t(m));
    }
  };
  uint64_t at = from;
  for (const ClockPoint& p : pts)
    if (p.mono_ns > at && p.mono_ns <= to) {
      gap(at, p.mono_ns);
      at = p.mono_ns;
    }
  gap(at, to);
}

// REALTIME second boundaries in [from, to] as MONOTONIC, with every recorded
// REALTIME - MONOTONIC offset in force over the span (a step inside it gives the
// boundaries of both offsets: more candidates, never fewer). A point reads the
// offset as [lo, lo + width]; readings that overlap are one offset (no step), and
// its upper end gives the earliest MONOTONIC instant of each boundary.
void second_boundaries(const ClockHistory& h, uint64_t from, uint64_t to, std::vector<uint64_t>& out) {
  std::vector<std::pair<int64_t, int64_t>> offsets;  // [lo, hi], one per step
  auto add = [&](const ClockPoint& p) {
    int64_t lo = p.rt_minus_mono_ns, hi;
    if (__builtin_add_overflow(lo, int64_t(p.rt_width_ns), &hi)) return;  // damaged: no offset
    for (auto& [l, h] : offsets)
      if (lo <= h && l <= hi) {  // the same offset: keep the tighter reading
        l = std::max(l, lo);
        h = std::min(h, hi);
        return;
      }
    offsets.push_back({lo, hi});
  };
  const ClockPoint* before = nullptr;
  for (const ClockPoint& p : h.points) {
    if (!p.has_realtime()) continue;
    if (p.mono_ns <= from)
      before = &p;
    else if (p.mono_ns <= to || offsets.empty())
      add(p);
  }
  if (before) add(*before);
  if (offsets.empty() && h.start_rt_minus_mono_ns)
    offsets.push_back({*h.start_rt_minus_mono_ns, *h.start_rt_minus_mono_ns});
  for (const auto& o : offsets) boundaries_per_gap(h.points, from, to, o.second, out);
}

// The first REALTIME second boundary after mono `t`, as MONOTONIC, with the
// REALTIME - MONOTONIC offset of the points on either side of t (both where a
// step lies between them); the earliest instant of each (the reading's upper end).
void next_boundaries(std::span<const ClockPoint> pts, uint64_t t, std::vector<uint64_t>& out) {
  auto it = std::upper_bound(pts.begin(), pts.end(), t, [](uint64_t v, const ClockPoint& p) { return v < p.mono_ns; });
  for (auto p : {it == pts.begin() ? pts.end() : std::prev(it), it}) {
    if (p == pts.end() || !p->has_realtime()) continue;
    int64_t off;
    if (__builtin_add_overflow(p->rt_minus_mono_ns, int64_t(p->rt_width_ns), &off)) continue;  // damaged
    __int128 s = floor_div128(__int128(t) + off, kSecond) + 1, m = s * kSecond - off;
    if (m > __int128(t) && m <= __int128(UINT64_MAX)) out.push_back(uint64_t(m));
  }
}

// What only a call changes: the frequency, the tick, the PLL constant and the
// status bits a caller sets (the kernel itself sets STA_UNSYNC, STA_CLOCKERR and
// the PPS signal bits; the offset moves at every second while slewing).
bool call_made_change(const NtpState& a, const NtpState& b) {
  constexpr int32_t kCallerBits = STA_PLL | STA_PPSFREQ | STA_PPSTIME | STA_FLL | STA_INS | STA_DEL | STA_FREQHOLD;
  return a.freq != b.freq || a.tick != b.tick || a.constant != b.constant ||
         (a.status & kCallerBits) != (b.status & kCallerBits);
}

// NTP states that changed what only a call changes, with no adjusting call
// recorded since the point before: a call the watch did not see (a 32-bit
// caller, whose compat syscalls miss the syscall tracepoints; a watch that is
// not running). The change lies anywhere between that point and this one: two
// spans there make every window over it unchecked.
void unwitnessed_calls(const ClockHistory& h, std::vector<ClockChange>& out) {
  const auto& pts = h.points;
  const NtpState* prev = nullptr;
  std::vector<uint64_t> calls;
  for (const auto& a : h.adjustments)
    if (a.adjusting()) calls.push_back(a.mono_ns);
  std::sort(calls.begin(), calls.end());
  for (const auto& a : h.adjustments) {
    if (a.kind != ClockAdjustKind::State) continue;
    bool changed = prev && call_made_change(*prev, a.state);
    prev = &a.state;
    if (!changed) continue;
    auto it = std::lower_bound(pts.begin(), pts.end(), a.mono_ns,
                               [](const ClockPoint& p, uint64_t m) { return p.mono_ns < m; });
    uint64_t from = it == pts.begin() ? 0 : std::prev(it)->mono_ns;
    auto c = std::lower_bound(calls.begin(), calls.end(), from);
    if (c != calls.end() && *c <= a.mono_ns + kChangeEffectNs) continue;  // witnessed
    out.insert(out.end(), 2, ClockChange{from, a.mono_ns});
  }
}

// One candidate per REALTIME second boundary. The same boundary, found through
// the REALTIME - MONOTONIC readings of different points (around a call, over a
// slewing span), comes out a few ns apart, the readings' widths; counted twice,
// it would make its own windows crowded. Instants no farther apart than the
// widest reading (at most 1 ms) are one boundary: one span over all of them.
void add_boundaries(std::span<const ClockPoint> pts, std::vector<uint64_t>& seconds, std::vector<ClockChange>& out) {
  auto effect = [](uint64_t at) { return at > UINT64_MAX - kChangeEffectNs ? UINT64_MAX : at + kChangeEffectNs; };
  uint64_t same = 0;
  for (const ClockPoint& p : pts)
    if (p.has_realtime()) same = std::max<uint64_t>(same, p.rt_width_ns);
  same = std::min<uint64_t>(same, 1'000'000);
  std::sort(seconds.begin(), seconds.end());
  for (size_t i = 0, j; i < seconds.size(); i = j) {
    for (j = i + 1; j < seconds.size() && seconds[j] - seconds[i] <= same;) ++j;
    out.push_back({seconds[i], effect(seconds[j - 1])});
  }
}

}  // namespace

std::vector<ClockChange> clock_change_candidates(const ClockHistory& h) {
  auto effect = [](uint64_t at) { return at > UINT64_MAX - kChangeEffectNs ? UINT64_MAX : at + kChangeEffectNs; };
  const auto& pts = h.points;
  std::vector<ClockChange> out;
  std::vector<uint64_t> seconds;
  for (const auto& a : h.adjustments)
    if (a.adjusting()) {
      uint64_t enter = a.enter_mono_ns && a.enter_mono_ns <= a.mono_ns ? a.enter_mono_ns : a.mono_ns;
      out.push_back({enter, effect(a.mono_ns)});
      // A new offset (0 included) replaces the one being slewed: the last
      // second's chunk stays in the tick length until the next boundary. An
      // adjtime() offset of up to 500 us (ADJ_OFFSET_SINGLESHOT has the
      // ADJ_OFFSET bit) goes in whole at that boundary and comes out at the one
      // after, which no NTP state may show when no point fell between.
      bool offset =
          (a.syscall == "adjtimex" || a.syscall == "clock_adjtime") && (!a.args_read || (a.modes & ADJ_OFFSET));
      if (offset) {
        next_boundaries(pts, a.mono_ns, seconds);
        if (a.mono_ns <= UINT64_MAX - kSecond) next_boundaries(pts, a.mono_ns + kSecond, seconds);
      }
    }
  if (!pts.empty()) next_boundaries(pts, pts.front().mono_ns, seconds);  // a call just before the start
  // A slew's last chunk stays in the tick length for a second after the states
  // read "no slew": the boundary after the first such state puts the base rate
  // back, with no call (an adjtime() slew of more than 500 us ends this way).
  for (auto [from, to] : slewing_spans(h)) {
    second_boundaries(h, from, to, seconds);
    if (to < pts.back().mono_ns) next_boundaries(pts, to, seconds);  // else past the recording
  }
  add_boundaries(pts, seconds, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  unwitnessed_calls(h, out);  // after unique: each comes as two, on purpose
  // The watch dropped call records: changes nobody saw may lie anywhere, any
  // number of them. Two spans over the whole recording say so: every window
  // holds two, and the model falls back to the monotonic bound everywhere.
  if (h.calls_dropped() && !pts.empty()) out.insert(out.end(), 2, ClockChange{pts.front().mono_ns, UINT64_MAX});
  return out;
}

}  // namespace cptrace
