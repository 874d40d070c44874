// Deadlines of the extra correlation points (clock_schedule.h).
#include "clock/clock_schedule.h"

namespace cptrace {
namespace {
constexpr uint64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;
}  // namespace

void ClockSchedule::on_change(uint64_t at) {
  for (uint64_t d : {0, 2, 5, 10, 20, 50}) due_.insert(at + d * kMs);
}

void ClockSchedule::around_second(uint64_t now, int64_t rt_minus_mono) {
  int64_t rt = int64_t(now) + rt_minus_mono;
  int64_t s = rt / kSecond + 1;  // REALTIME is positive here (after 1970)
  int64_t boundary = s * kSecond - rt_minus_mono;  // as MONOTONIC
  if (boundary == last_boundary_) return;
  last_boundary_ = boundary;
  if (boundary - int64_t(3 * kMs) > int64_t(now)) due_.insert(uint64_t(boundary) - 3 * kMs);
  due_.insert(uint64_t(boundary) + 3 * kMs);
  due_.insert(uint64_t(boundary) + 10 * kMs);
}

std::optional<uint64_t> ClockSchedule::next() const {
  if (due_.empty()) return std::nullopt;
  return *due_.begin();
}

bool ClockSchedule::take_due(uint64_t now) {
  bool any = false;
  while (!due_.empty() && *due_.begin() <= now) {
    due_.erase(due_.begin());
    any = true;
  }
  return any;
}

}  // namespace cptrace
