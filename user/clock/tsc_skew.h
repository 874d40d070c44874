// Cross-CPU TSC skew, measured: same-node durations and every cp_logTS stamp
// compare TSC readings taken on different CPUs, so the offset between two CPUs'
// counters is part of every such bound. Two threads, pinned to the reference CPU
// and to CPU k, pass one cache line back and forth, each message carrying the
// sender's TSC taken before it sent; the receiver stamps its own TSC after it
// saw the message. A message cannot arrive before it was sent, so each one
// bounds TSC_k - TSC_ref from one side (docs/clock.md, "TSC trust").
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

// TSC_cpu - TSC_reference, in ticks, lies in [lo, hi]: strict, whatever the
// delays of the messages.
struct CpuSkew {
  int cpu = 0;
  int64_t lo = 0, hi = 0;
  uint64_t hops = 0;  // messages exchanged
  int64_t width() const { return hi - lo; }
};

struct TscSkew {
  int reference_cpu = -1;
  std::vector<CpuSkew> cpus;  // every other online CPU measured
  std::vector<int> unmeasured;  // online CPUs not pinned to, or without both bounds in time
  double elapsed_ms = 0;
  double tsc_hz = 0;  // TSC rate over the run against CLOCK_MONOTONIC_RAW, for display only
  uint64_t tsc_begin = 0, tsc_end = 0;  // the reference thread's TSC around the whole measure
  // Every online CPU measured (a machine of one CPU has nothing to measure).
  bool complete() const { return reference_cpu >= 0 && unmeasured.empty(); }
  // [lo, hi] holding TSC_k - TSC_ref for every CPU k, the reference's own 0
  // included; nullopt unless complete(): a CPU not measured is not bounded.
  std::optional<std::pair<int64_t, int64_t>> widest() const;
  int64_t max_abs() const;  // max over CPUs of max(|lo|, |hi|), ticks
  nlohmann::json to_json() const;  // reference, per-CPU intervals, unmeasured CPUs, time taken
};

// How a measure may take the CPUs: at start and stop a wide interval is
// measured again at SCHED_FIFO priority (the traced programs are held or gone,
// or lose 10 ms); while recording it is not, as that would take their CPUs.
enum class SkewRetry { Realtime, None };

// Measures every online CPU against CPU 0 (or the first online CPU this process
// may run on) within `budget` in all, the CPUs sharing it.
TscSkew measure_tsc_skew(std::chrono::microseconds budget = std::chrono::milliseconds(50),
                         SkewRetry retry = SkewRetry::Realtime);

}  // namespace cptrace
