// Reading a clock in nanoseconds: for instants that are not event timestamps
// (deadlines, pacing, meta.json's start/stop), which never need the TSC.
#pragma once
#include <time.h>

#include <cstdint>

#include "os/time_units.h"

namespace cptrace {

inline int64_t clock_now_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return timespec_ns(ts);
}

inline int64_t mono_ns() { return clock_now_ns(CLOCK_MONOTONIC); }

// CLOCK_REALTIME - CLOCK_MONOTONIC now: the realtime read bracketed by two
// monotonic reads, tightest bracket of `tries`. Adding it to a mono_ns gives the
// wall-clock time of that same instant (meta.json start/stop), instead of the
// time of whenever the realtime clock happened to be read.
inline int64_t realtime_minus_mono_ns(int tries = 5) {
  int64_t best_width = INT64_MAX, best = 0;
  for (int i = 0; i < tries; ++i) {
    int64_t m1 = mono_ns(), rt = clock_now_ns(CLOCK_REALTIME), m2 = mono_ns();
    if (m2 - m1 < best_width) {
      best_width = m2 - m1;
      best = rt - (m1 + (m2 - m1) / 2);
    }
  }
  return best;
}

}  // namespace cptrace
