#include "record/clock_stream.h"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/core.h>

#include "sync/minrtt_record.h"
#include "clock/clock_map.h"
#include "clock/clock_now.h"
#include "os/time_units.h"
#include "os/say.h"

using nlohmann::json;

namespace cptrace {

// Two points before any event frame can be written, so even a recorder killed
// in its first flush period leaves convertible timestamps. The REALTIME offset
// is read with the first, so meta "start" is one instant.
ClockStream::ClockStream(const std::string& simulate_clock, Witness witness) : witness_(witness == Witness::On) {
  if (witness_) {
    clockadj_ = start_clock_adjust_watch(clockadj_missing_);  // first: it sees every change from here on
    clocksource_.emplace();
  }
  points_ = {sample_clock_point()};
  start_rt_minus_mono_ = realtime_minus_mono_ns();
  usleep(20000);
  points_.push_back(sample_clock_point());
  raw_tsc_hz_ = ClockMap(points_).tsc_hz();
  sim_ = make_simulated_clock(simulate_clock, raw_tsc_hz_);
  for (auto& p : points_) {
    p.tsc = sim_.apply(p.tsc);
    if (p.has_raw()) p.raw_tsc = sim_.apply(p.raw_tsc);
  }
  if (witness_)
    for (const auto& p : points_) note_clock_state(p);
}

double ClockStream::tsc_hz() const { return ClockMap(points_).tsc_hz(); }

ClockPoint ClockStream::sample() const {
  ClockPoint p = sample_clock_point();
  p.tsc = sim_.apply(p.tsc);  // test-only simulated clock: every TSC this node writes
  if (p.has_raw()) p.raw_tsc = sim_.apply(p.raw_tsc);
  return p;
}

// One correlation point now, with what changed in the clock's discipline since
// the last one.
void ClockStream::take_point() {
  points_.push_back(sample());
  if (!witness_) return;
  note_clock_state(points_.back());
  if (clocksource_ && points_.size() >= 2)
    clocksource_->poll(points_[points_.size() - 2].mono_ns, points_.back().mono_ns);
}

// The NTP state (when it changed) and a step of CLOCK_REALTIME (when REALTIME -
// MONOTONIC moved beyond both points' reading errors) at point p.
void ClockStream::note_clock_state(const ClockPoint& p) {
  ClockAdjustment a;
  a.mono_ns = p.mono_ns;
  a.tsc = p.tsc;
  try {
    NtpState s = read_ntp_state();
    if (!ntp_ || !ntp_->same_discipline(s)) {
      a.kind = ClockAdjustKind::State;
      a.state = s;
      adjustments_.push_back(a);
      ntp_ = s;
    }
  } catch (const std::exception& e) {
    if (!ntp_) say("NTP state not recorded: {}", e.what());
    ntp_ = NtpState{};
  }
  const ClockPoint* prev = nullptr;
  for (size_t i = points_.size(); i-- > 0;)
    if (&points_[i] != &p && points_[i].has_realtime() && points_[i].mono_ns < p.mono_ns) {
      prev = &points_[i];
      break;
    }
  if (!p.has_realtime() || !prev) return;
  int64_t lo = p.rt_minus_mono_ns, hi = lo + p.rt_width_ns;
  int64_t plo = prev->rt_minus_mono_ns, phi = plo + prev->rt_width_ns;
  if (lo <= phi && plo <= hi) return;  // the offset is the same: no step
  a.kind = ClockAdjustKind::Step;
  a.step_ns = (lo + hi) / 2 - (plo + phi) / 2;
  a.rt_minus_mono_ns = lo;
  a.since_mono_ns = prev->mono_ns;
  adjustments_.push_back(a);
  schedule_.on_change(p.mono_ns);
}

// Clock-adjusting calls the BPF watch saw since the last look: recorded, and
// correlation points scheduled around each change (clock_schedule.h). One look
// empties the watch's ring (ClockAdjustWatch::take consumes all of it).
void ClockStream::take_clock_syscalls() {
  if (!clockadj_) return;
  for (const cp_clockadj_rec& r : clockadj_->take()) {
    ClockAdjustment a = from_syscall_record(r);
    adjustments_.push_back(a);
    if (a.adjusting()) schedule_.on_change(mono_ns());
  }
}

// Until deadline_mono (CLOCK_MONOTONIC ns), or earlier when the clock watch has
// records, wake_fd is readable, or a signal arrives. Never a busy loop: one
// wake-up per deadline (a readable wake_fd is the caller's to act on).
void ClockStream::wait_for_clock(uint64_t deadline_mono, int wake_fd) {
  int64_t left = int64_t(deadline_mono) - mono_ns();
  if (left <= 0) return;
  timespec ts = ns_timespec(left);
  pollfd pfd[2];
  nfds_t n = 0;
  if (clockadj_) pfd[n++] = {clockadj_->fd(), POLLIN, 0};
  if (wake_fd >= 0) pfd[n++] = {wake_fd, POLLIN, 0};
  ppoll(pfd, n, &ts, nullptr);
}

// While NTP slews an offset the kernel changes the rate at every REALTIME
// second boundary: the schedule asks for points around the next one.
void ClockStream::wait_for_next(uint64_t next_regular, int wake_fd) {
  if (ntp_ && ntp_->slewing() && points_.back().has_realtime())
    schedule_.around_second(mono_ns(), points_.back().rt_minus_mono_ns);
  wait_for_clock(std::min(next_regular, schedule_.next().value_or(UINT64_MAX)), wake_fd);
  take_clock_syscalls();
}

void ClockStream::point_if_due(uint64_t now, bool regular) {
  if (schedule_.take_due(now) || regular) {
    take_point();
    if (!regular) ++extra_points_;
  }
}

void ClockStream::add_extra_points(const std::vector<ClockPoint>& points) {
  points_.insert(points_.end(), points.begin(), points.end());
  extra_points_ += points.size();
}

// Adjustments made during the stop sequence are taken before the last point:
// without them the model could not tell that its windows there held two
// changes (docs/clock.md).
void ClockStream::take_last_point() {
  take_clock_syscalls();
  take_point();
  stop_rt_minus_mono_ = realtime_minus_mono_ns();
}

std::optional<EncodedFrame> ClockStream::take_points_frame() {
  if (points_.size() <= points_written_) return std::nullopt;
  EncodedFrame f = encode_clock({points_.begin() + points_written_, points_.end()});
  points_written_ = points_.size();
  return f;
}

std::optional<EncodedFrame> ClockStream::take_adjustments_frame() {
  if (adjustments_.size() <= adjustments_written_) return std::nullopt;
  std::vector<ClockAdjustment> fresh(adjustments_.begin() + adjustments_written_, adjustments_.end());
  adjustments_written_ = adjustments_.size();
  return encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(fresh), uint32_t(fresh.size()));
}

json ClockStream::start_json() const {
  const ClockPoint& first = points_.front();
  return {{"realtime_ns", uint64_t(int64_t(first.mono_ns) + start_rt_minus_mono_)},
          {"mono_ns", first.mono_ns},
          {"tsc", first.tsc}};
}

json ClockStream::stop_json() const {
  const ClockPoint& last = points_.back();
  return {{"realtime_ns", uint64_t(int64_t(last.mono_ns) + stop_rt_minus_mono_)},
          {"mono_ns", last.mono_ns},
          {"tsc", last.tsc}};
}

json ClockStream::discipline_json() const {
  json cd = {{"syscalls_watched", bool(clockadj_)},
             {"adjustments", adjustments_.size()},
             {"extra_points", extra_points_},
             {"clocksource", current_clocksource()}};
  if (clocksource_) clocksource_->describe(cd);
  if (clockadj_) {
    cd["syscalls_seen"] = clockadj_->seen();
    cd["syscalls_dropped"] = clockadj_->dropped();
  } else {
    cd["why_not_watched"] = clockadj_missing_;
  }
  return cd;
}

}  // namespace cptrace
