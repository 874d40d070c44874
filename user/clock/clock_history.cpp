// A recording's clock history from its meta.json (clock_history.h).
#include "clock/clock_history.h"

namespace cptrace {

ClockHistory ClockHistory::from_meta(const nlohmann::json& meta, std::span<const ClockPoint> points,
                                     std::span<const ClockAdjustment> adjustments) {
  ClockHistory h;
  h.points = points;
  h.adjustments = adjustments;
  auto cd = meta.find("clock_discipline");
  if (cd != meta.end() && cd->is_object()) {
    auto w = cd->find("syscalls_watched");
    h.syscalls_watched = w != cd->end() && *w == true;
    auto d = cd->find("syscalls_dropped");
    if (d != cd->end() && d->is_number_unsigned())
      h.syscalls_dropped = d->get<uint64_t>();
    else if (d != cd->end() && d->is_number() && d->get<double>() >= 0)  // written signed, or as a float
      h.syscalls_dropped = d->get<double>() > 0 ? uint64_t(1) : uint64_t(0);  // some (how many: unsure), or none
  }
  auto start = meta.find("start");
  if (start != meta.end() && start->is_object()) {
    auto rt = start->find("realtime_ns"), mono = start->find("mono_ns");
    int64_t off = 0;
    if (rt != start->end() && mono != start->end() && rt->is_number_integer() && mono->is_number_integer() &&
        !__builtin_sub_overflow(rt->get<int64_t>(), mono->get<int64_t>(), &off))
      h.start_rt_minus_mono_ns = off;
  }
  return h;
}

}  // namespace cptrace
