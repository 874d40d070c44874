// Reading a clock in nanoseconds: for instants that are not event timestamps
// (deadlines, pacing, meta.json's start/stop), which never need the TSC.
#pragma once
#include <time.h>

#include <cstdint>

namespace cptrace {

inline int64_t clock_now_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t mono_ns() { return clock_now_ns(CLOCK_MONOTONIC); }

}  // namespace cptrace
