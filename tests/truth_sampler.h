// Ground truth for CLOCK_MONOTONIC -> TSC conversions on a clock that is being
// slewed: a thread that reads (lfence; rdtsc) / clock_gettime(CLOCK_MONOTONIC) /
// (lfence; rdtsc; lfence) about every millisecond. The TSC at each sample's monotonic
// instant lies inside its bracket [tsc_lo, tsc_hi], whatever the clock's rate is
// doing, so a conversion model's bound at that instant must meet the bracket.
#pragma once
#include <time.h>
#include <x86intrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace truth {

struct MonoSample {
  uint64_t mono_ns;
  uint64_t tsc_lo, tsc_hi;  // physical TSC
};

inline MonoSample sample_mono(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts;
  _mm_lfence();
  uint64_t a = __rdtsc();
  _mm_lfence();
  clock_gettime(clock, &ts);
  _mm_lfence();  // not rdtscp: some VMs' CPUs fault on it
  uint64_t b = __rdtsc();
  _mm_lfence();
  return {uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec), a, b};
}

// The physical TSC's frequency against CLOCK_MONOTONIC_RAW (the second durations
// in ns are given in: clock/tsc_frequency.h) between two RAW samples, as a strict
// interval [lo, hi] in ticks per second (1 ns reading resolution per sample).
struct RawHz {
  long double lo = 0, hi = 0;
};
inline RawHz raw_hz(const MonoSample& a, const MonoSample& b) {
  long double dn = (long double)(b.mono_ns - a.mono_ns);
  return {(long double)(b.tsc_lo - a.tsc_hi) / (dn + 1) * 1e9L, (long double)(b.tsc_hi - a.tsc_lo) / (dn - 1) * 1e9L};
}

class MonoSampler {
 public:
  explicit MonoSampler(int period_us = 1000) : period_us_(period_us), th_([this] { run(); }) {}
  MonoSampler(const MonoSampler&) = delete;
  MonoSampler& operator=(const MonoSampler&) = delete;
  ~MonoSampler() { stop(); }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
  }
  const std::vector<MonoSample>& samples() const { return samples_; }  // after stop()

 private:
  void run() {
    samples_.reserve(1 << 16);
    while (!stop_) {
      // The narrowest of three: a preempted read only widens a bracket, never
      // falsifies it, but narrow brackets make a sharper check.
      MonoSample best = sample_mono();
      for (int i = 0; i < 2; i++) {
        MonoSample s = sample_mono();
        if (s.tsc_hi - s.tsc_lo < best.tsc_hi - best.tsc_lo) best = s;
      }
      samples_.push_back(best);
      std::this_thread::sleep_for(std::chrono::microseconds(period_us_));
    }
  }
  int period_us_;
  std::atomic<bool> stop_{false};
  std::vector<MonoSample> samples_;
  std::thread th_;  // last: starts after every other member is built
};

}  // namespace truth
