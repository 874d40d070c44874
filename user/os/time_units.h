// The time units every stage converts between, named once: nanoseconds are
// the unit of every clock read and every stamp converted out of TSC ticks.
#pragma once
#include <time.h>

#include <cstdint>

namespace cptrace {

inline constexpr int64_t kNsPerSecond = 1'000'000'000;
inline constexpr int64_t kNsPerMs = 1'000'000;
inline constexpr int64_t kNsPerUs = 1'000;

// A timespec as nanoseconds since its clock's epoch.
constexpr int64_t timespec_ns(const timespec& t) { return int64_t(t.tv_sec) * kNsPerSecond + t.tv_nsec; }
// Nanoseconds (>= 0) as a timespec, for sleeps and timeouts.
constexpr timespec ns_timespec(int64_t ns) { return {time_t(ns / kNsPerSecond), long(ns % kNsPerSecond)}; }
// Nanoseconds as seconds, and back (exact inverses of dividing or multiplying by 1e9).
constexpr double ns_to_seconds(double ns) { return ns / 1e9; }
constexpr double seconds_to_ns(double s) { return s * 1e9; }

}  // namespace cptrace
