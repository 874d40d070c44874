// A node's clock-correlation stream, for `record` and `sync`: the correlation
// points (TSC against CLOCK_MONOTONIC, RAW and REALTIME), the test-only
// --simulate-clock transform applied to every TSC the node writes, the
// REALTIME - MONOTONIC offsets that make meta.json's "start" and "stop" one
// instant on all clocks, and, for a recording, the witness of the clock's
// discipline: clock-adjusting syscalls (BPF watch), NTP state changes,
// REALTIME steps, the clocksource, and the extra points taken around each
// change (clock_schedule.h). Points and adjustments leave as Clock and
// ClockAdjust frames, each once.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probe/clock_adjust_watch.h"
#include "clock/clock_schedule.h"
#include "clock/clocksource_watch.h"
#include "trace/block_codec.h"
#include "trace/clock_adjust.h"
#include "clock/clock_transform.h"
#include "clock/ntp_state.h"
#include "trace/trace_format.h"

namespace cptrace {

class ClockStream {
 public:
  // Off (`sync`): points only. On (`record`): the discipline is witnessed too.
  enum class Witness { Off, On };

  // Starts the stream: with Witness::On the syscall watch and the clocksource
  // first (they see every change from here on); then two points 20 ms apart,
  // the simulated clock made from their rate, and applied to both.
  ClockStream(const std::string& simulate_clock, Witness witness);

  const ClockTransform& sim() const { return sim_; }
  // The TSC rate of the two start points as read, before the simulated clock
  // (what the BPF `counter` handlers run on).
  double raw_tsc_hz() const { return raw_tsc_hz_; }
  // The rate of the points so far (simulated TSC).
  double tsc_hz() const;
  const std::vector<ClockPoint>& points() const { return points_; }
  bool watching_syscalls() const { return bool(clockadj_); }
  const std::string& why_not_watched() const { return clockadj_missing_; }

  // One point now on the node's (simulated) TSC; safe from any thread.
  ClockPoint sample() const;
  // Until the next point is due (the regular one at `next_regular`, or one the
  // schedule asks for) or `wake_fd` (when >= 0) is readable, then the syscalls
  // seen meanwhile.
  void wait_for_next(uint64_t next_regular, int wake_fd = -1);
  // A point at CLOCK_MONOTONIC `now` when the schedule or the regular cadence
  // asks for one.
  void point_if_due(uint64_t now, bool regular);
  // Points beyond the regular cadence taken without the discipline check (after
  // attaching, by the correlation keeper during the stop sequence).
  void add_extra_points(const std::vector<ClockPoint>& points);
  // The last point, with the syscalls made up to it, and the REALTIME offset
  // for "stop".
  void take_last_point();

  // The points, and the adjustments, not yet written (nullopt: none).
  std::optional<EncodedFrame> take_points_frame();
  std::optional<EncodedFrame> take_adjustments_frame();
  EncodedFrame last_point_frame() const { return encode_clock({points_.back()}); }

  // meta.json "start" (the first point) and "stop" (the last one).
  nlohmann::json start_json() const;
  nlohmann::json stop_json() const;
  // meta.json "clock_discipline" (Witness::On).
  nlohmann::json discipline_json() const;

 private:
  void take_point();
  void note_clock_state(const ClockPoint& p);
  void take_clock_syscalls();
  void wait_for_clock(uint64_t deadline_mono, int wake_fd);

  bool witness_;
  std::unique_ptr<ClockAdjustWatch> clockadj_;  // nullptr: off, or the kernel lacks what it needs
  std::string clockadj_missing_;
  std::optional<ClocksourceWatch> clocksource_;  // from the first point on (Witness::On)
  std::vector<ClockPoint> points_;
  size_t points_written_ = 0;
  std::vector<ClockAdjustment> adjustments_;
  size_t adjustments_written_ = 0;
  std::optional<NtpState> ntp_;  // at the last correlation point
  ClockSchedule schedule_;  // extra correlation points around clock changes
  uint64_t extra_points_ = 0;  // beyond the 100 ms cadence: the schedule's, after attaching, the stop sequence's
  ClockTransform sim_;
  double raw_tsc_hz_ = 0;
  int64_t start_rt_minus_mono_ = 0, stop_rt_minus_mono_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC
};

}  // namespace cptrace
