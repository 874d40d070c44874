// The mono -> TSC conversion model of clock_bounds.h: per segment, which
// hypotheses fit the data, and the union of their bounds at an instant.
#include "clock/clock_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace cptrace {
namespace {

using ld = long double;

bool overlap(ld alo, ld ahi, ld blo, ld bhi) { return alo <= bhi && blo <= ahi; }

// u in [0, span] with k0 + k1 u <= 0, intersected into [lo, hi].
void solve_le(ld k0, ld k1, ld span, ld& lo, ld& hi) {
  if (k1 == 0) {
    if (k0 > 0) {  // empty
      lo = 1;
      hi = 0;
    }
    return;
  }
  ld r = -k0 / k1;
  if (k1 > 0)
    hi = std::min(hi, r);
  else
    lo = std::max(lo, r);
  lo = std::max(lo, ld(0));
  hi = std::min(hi, span);
}

// Saturating: a damaged trace's points can put a bound beyond 64 bits.
constexpr ld kTickMax = ld(UINT64_MAX);
uint64_t floor_tick(ld v) { return !(v > 0) ? 0 : v >= kTickMax ? UINT64_MAX : uint64_t(std::floor(v)); }
uint64_t ceil_tick(ld v) { return !(v > 0) ? 0 : v >= kTickMax ? UINT64_MAX : uint64_t(std::ceil(v)); }

}  // namespace

ClockBounds::ClockBounds(const std::vector<ClockPoint>& pts, std::vector<ClockChange> changes,
                         std::vector<ClockChange> faults, ClockReading reading, TicksPerNs envelope)
    : changes_(std::move(changes)),
      faults_(std::move(faults)),
      quantum_(ld(std::max<uint64_t>(1, reading.quantum_ns))),
      envelope_(envelope.known() ? Rate{envelope.lo, envelope.hi} : Rate{}) {
  if (pts.size() < 2) return;
  std::sort(changes_.begin(), changes_.end());
  std::sort(faults_.begin(), faults_.end());
  for (ClockChange& c : changes_) {
    c.to_ns = std::max(c.to_ns, c.from_ns);
    longest_change_ = std::max(longest_change_, c.to_ns - c.from_ns);
  }
  // A reading is the true value truncated to the clock's quantum: the instant
  // mono == m_i may be up to one quantum (about `per_ns` ticks a ns, 1.5 for a
  // rate that is slewed) before the bracket's start.
  ld per_ns = ld(pts.back().tsc - pts.front().tsc) / ld(pts.back().mono_ns - pts.front().mono_ns);
  ld res = std::ceil(per_ns * 1.5L * quantum_) + 1;
  for (const ClockPoint& p : pts) {
    ld t1 = ld(p.tsc - p.width_ticks / 2);  // the bracket's first rdtsc (ClockPoint: midpoint)
    m_.push_back(ld(p.mono_ns));
    a_.push_back(t1 - res);
    b_.push_back(t1 + ld(p.width_ticks) + 1);
  }
  seg_.resize(pts.size() - 1);
  for (size_t i = 0; i < seg_.size(); ++i) classify(i);
  // The envelope is checked too: one segment whose own average rate leaves it
  // shows the discipline was not what the states and calls said.
  for (const Segment& s : seg_)
    if (s.fit != Fit::Departed && !overlap(s.own.lo, s.own.hi, envelope_.lo, envelope_.hi)) envelope_ = {};
  for (Segment& s : seg_) {
    s.enveloped = envelope_.lo > 0 && (s.fit == Fit::Violated || s.fit == Fit::Crowded);
    stats_.enveloped += s.enveloped;
  }
}

// How many witnessed changes may take effect inside mono [lo, hi], counted up
// to two: all the model asks is none, one, or more.
size_t ClockBounds::changes_in(ld lo, ld hi) const {
  ld from = std::max(ld(0), lo - ld(longest_change_));
  auto it = std::lower_bound(changes_.begin(), changes_.end(), ClockChange{uint64_t(from), 0});
  size_t n = 0;
  for (; n < 2 && it != changes_.end() && ld(it->from_ns) <= hi; ++it) n += ld(it->to_ns) >= lo;
  return n;
}

// Whether a fault segment (raw_witness.h) overlaps mono (lo, hi). Faults are
// segments between points: sorted, they do not overlap.
bool ClockBounds::fault_in(ld lo, ld hi) const {
  auto it =
      std::upper_bound(faults_.begin(), faults_.end(), lo, [](ld v, const ClockChange& f) { return v < ld(f.to_ns); });
  return it != faults_.end() && ld(it->from_ns) < hi;
}

// Rate bounds between points j < k, widened by `slack` (relative).
ClockBounds::Rate ClockBounds::rate(size_t j, size_t k, ld slack) const {
  ld span = m_[k] - m_[j];
  Rate r{(a_[k] - b_[j]) / span, (b_[k] - a_[j]) / span};
  r.lo = std::max(ld(0), r.lo * (1 - slack));
  r.hi *= 1 + slack;
  return r;
}

// Where H1's single change can lie: the c (as u = c - m_i) at which the line
// from point i at segment i-1's rate meets the line back from point i+1 at
// segment i+1's rate, each band widened by the brackets.
bool ClockBounds::h1_window(size_t i, Rate ra, Rate rb, ld& c_lo, ld& c_hi) const {
  ld span = m_[i + 1] - m_[i];
  c_lo = 0, c_hi = span;
  solve_le(a_[i] - b_[i + 1] + rb.lo * span, ra.lo - rb.lo, span, c_lo, c_hi);  // A_lo(c) <= B_hi(c)
  solve_le(a_[i + 1] - b_[i] - rb.hi * span, rb.hi - ra.hi, span, c_lo, c_hi);  // B_lo(c) <= A_hi(c)
  return c_lo <= c_hi;
}

void ClockBounds::classify(size_t i) {
  Segment& s = seg_[i];
  const ld d = kDitherPpm * 1e-6L;
  const size_t last = m_.size() - 1;
  s.own = rate(i, i + 1, d);
  bool has_before = i > 0, has_after = i + 2 <= last;
  Rate nb_before = has_before ? rate(i - 1, i, 2 * d) : Rate{};
  Rate nb_after = has_after ? rate(i + 1, i + 2, 2 * d) : Rate{};
  stats_.segments++;
  // Witnessed changes whose effect can fall inside the three-segment window.
  // At either end of the stream a change inside the end segment has no
  // neighbour beyond it to show it (H1 cannot be weighed): one witnessed there
  // leaves the segment as unchecked as two in a window.
  size_t in_window = changes_in(m_[has_before ? i - 1 : i], m_[has_after ? i + 2 : i + 1]);
  bool end_changed = (!has_before || !has_after) && changes_in(m_[i], m_[i + 1]) > 0;
  if (in_window >= 2 || end_changed) {
    s.fit = Fit::Crowded;
    stats_.crowded++;
    return;
  }
  // The clock moved against the TSC inside this segment or a neighbour whose
  // rate the hypotheses read: no rate there means anything.
  if (fault_in(m_[has_before ? i - 1 : i], m_[has_after ? i + 2 : i + 1])) {
    s.fit = Fit::Departed;
    stats_.departed++;
    return;
  }
  // H0: the one change (if any) is in a neighbour, so the other neighbour shares
  // segment i's rate.
  bool h0 = (!has_before && !has_after) || (has_before && overlap(s.own.lo, s.own.hi, nb_before.lo, nb_before.hi)) ||
            (has_after && overlap(s.own.lo, s.own.hi, nb_after.lo, nb_after.hi));
  // H1: the change is in segment i, so the windows on either side hold no other
  // one: the two segments before and the two after are each one line, and a
  // longer baseline (when there is one) narrows the rate a short segment gives.
  // That baseline rests on the window of segment i-1 (i+1) as well: it is used
  // only where that window, too, holds fewer than two witnessed changes.
  bool h1 = has_before && has_after;
  if (h1) {
    s.before = nb_before, s.after = nb_after;
    if (i >= 2 && changes_in(m_[i - 2], m_[i + 1]) < 2 && !fault_in(m_[i - 2], m_[i]))
      s.before = intersect(s.before, rate(i - 2, i, 2 * d));
    if (i + 3 <= last && changes_in(m_[i], m_[i + 3]) < 2 && !fault_in(m_[i + 1], m_[i + 3]))
      s.after = intersect(s.after, rate(i + 1, i + 3, 2 * d));
    h1 = s.before.lo <= s.before.hi && s.after.lo <= s.after.hi && h1_window(i, s.before, s.after, s.c_lo, s.c_hi);
  }
  s.fit = h0 && h1 ? Fit::Both : h0 ? Fit::H0 : h1 ? Fit::H1 : Fit::Violated;
  (h0 && h1 ? stats_.either : h0 ? stats_.one_rate : h1 ? stats_.rate_change : stats_.violated)++;
}

// A rate within r all through segment i: the stamp is on a line of such a rate
// from each of the segment's two points.
void ClockBounds::at_rate(size_t i, const Rate& r, ld m, ld& lo, ld& hi) const {
  ld u = m - m_[i], v = m_[i + 1] - m;
  lo = std::max(a_[i] + r.lo * u, a_[i + 1] - r.hi * v);
  hi = std::min(b_[i] + r.hi * u, b_[i + 1] - r.lo * v);
}

// H0: one rate through segment i, its own.
void ClockBounds::h0(size_t i, ld m, ld& lo, ld& hi) const { at_rate(i, seg_[i].own, m, lo, hi); }

// H1: before the change the stamp is on the line from point i at the earlier
// rate, after it on the line back from point i+1 at the later rate; each is
// also bounded through the change instant from the other side.
void ClockBounds::h1(size_t i, ld m, ld& lo, ld& hi) const {
  const Segment& s = seg_[i];
  const Rate &ra = s.before, &rb = s.after;
  ld span = m_[i + 1] - m_[i], u = m - m_[i];
  lo = INFINITY, hi = -INFINITY;
  if (u <= s.c_hi) {  // m before the change
    ld c0 = std::max(u, s.c_lo), c1 = s.c_hi;
    auto via_lo = [&](ld c) { return a_[i + 1] - rb.hi * (span - c) - ra.hi * (c - u); };
    auto via_hi = [&](ld c) { return b_[i + 1] - rb.lo * (span - c) - ra.lo * (c - u); };
    ld l = std::max(a_[i] + ra.lo * u, std::min(via_lo(c0), via_lo(c1)));
    ld h = std::min(b_[i] + ra.hi * u, std::max(via_hi(c0), via_hi(c1)));
    if (l <= h) {
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
  }
  if (u >= s.c_lo) {  // m after the change
    ld c0 = s.c_lo, c1 = std::min(u, s.c_hi);
    auto via_lo = [&](ld c) { return a_[i] + ra.lo * c + rb.lo * (u - c); };
    auto via_hi = [&](ld c) { return b_[i] + ra.hi * c + rb.hi * (u - c); };
    ld l = std::max(a_[i + 1] - rb.hi * (span - u), std::min(via_lo(c0), via_lo(c1)));
    ld h = std::min(b_[i + 1] - rb.lo * (span - u), std::max(via_hi(c0), via_hi(c1)));
    if (l <= h) {
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
  }
}

// The envelope: whatever the rate did inside segment i, it stayed within it.
void ClockBounds::in_envelope(size_t i, ld m, ld& lo, ld& hi) const { at_rate(i, envelope_, m, lo, hi); }

TscBounds ClockBounds::mono_to_tsc(uint64_t mono_ns) const {
  if (seg_.empty())
    throw std::domain_error("clock map needs at least two correlation points (has " + std::to_string(m_.size()) + ")");
  // The stamp was read in steps of the clock's quantum: the instant is in [m, m + q).
  ld m = ld(mono_ns), m1 = m + quantum_;
  size_t i = size_t(std::upper_bound(m_.begin(), m_.end(), m) - m_.begin());
  i = std::min(i == 0 ? 0 : i - 1, seg_.size() - 1);
  const Segment& s = seg_[i];
  if (m < m_.front()) {  // before the stream: the first segment's rate, not strict
    ld lo = a_[0] - s.own.hi * (m_[0] - m), hi = b_[0] - s.own.lo * (m_[0] - m1);
    return {floor_tick(lo), ceil_tick(std::max(lo, hi))};
  }
  if (m1 > m_.back()) {  // after it: the last segment's rate, not strict
    ld lo = std::max(a_[i], a_[i + 1] + s.own.lo * (m - m_[i + 1]));
    ld hi = b_[i + 1] + s.own.hi * (m1 - m_[i + 1]);
    return {floor_tick(lo), ceil_tick(std::max(lo, hi))};
  }
  ld lo = INFINITY, hi = -INFINITY;
  auto take = [&](void (ClockBounds::*f)(size_t, ld, ld&, ld&) const) {
    ld l0, h0, l1, h1;
    (this->*f)(i, m, l0, h0);
    (this->*f)(i, m1, l1, h1);
    if (l0 <= h0) lo = std::min(lo, l0);
    if (l1 <= h1) hi = std::max(hi, h1);
  };
  if (s.fit == Fit::Both || s.fit == Fit::H0) take(&ClockBounds::h0);
  if (s.fit == Fit::Both || s.fit == Fit::H1) take(&ClockBounds::h1);
  if (s.enveloped) take(&ClockBounds::in_envelope);
  // Always true, whatever the model: the clock is monotonic between the points.
  lo = std::isfinite(lo) ? std::max(lo, a_[i]) : a_[i];
  hi = std::isfinite(hi) ? std::min(hi, b_[i + 1]) : b_[i + 1];
  return {floor_tick(lo), ceil_tick(std::max(lo, hi))};
}

}  // namespace cptrace
