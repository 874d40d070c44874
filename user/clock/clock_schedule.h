// When the recorder takes correlation points beyond its regular one every 100 ms.
// A CLOCK_MONOTONIC stamp is converted to TSC by the correlation points around it;
// a rate change between two points is what the conversion has to bound, so
// points are taken densely where the rate may have just changed:
//  - after a clock change (an adjusting syscall the BPF watch saw, or a step of
//    CLOCK_REALTIME): at once and at +2, +5, +10, +20, +50 ms, so the segment
//    holding the change is short and the ones after it show the new rate;
//  - while the NTP state shows an offset being slewed (the kernel changes the
//    rate at every CLOCK_REALTIME second boundary): at -3 ms, +3 ms and +10 ms
//    around each boundary, so each change sits in a 6 ms segment.
// Only deadlines: the recorder sleeps until the next one (or a syscall record),
// so an idle recording wakes no more often than before.
#pragma once
#include <cstdint>
#include <optional>
#include <set>

namespace cptrace {

constexpr uint64_t kRegularPointNs = 100'000'000;

class ClockSchedule {
 public:
  // A change of the clock seen at CLOCK_MONOTONIC `at`.
  void on_change(uint64_t at);
  // Points around the next REALTIME second boundary after `now` (once per
  // boundary), with REALTIME = MONOTONIC + rt_minus_mono.
  void around_second(uint64_t now, int64_t rt_minus_mono);
  // The earliest pending deadline.
  std::optional<uint64_t> next() const;
  // Drops every deadline at or before `now`; whether there was one.
  bool take_due(uint64_t now);

 private:
  std::set<uint64_t> due_;
  int64_t last_boundary_ = INT64_MIN;
};

}  // namespace cptrace
