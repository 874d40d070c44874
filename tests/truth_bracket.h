// The ground truth a test workload writes (tests/workloads/pipeline.cpp --truth):
// one record per logging call, the physical TSC read just before it (lfence; rdtsc)
// and just after it (lfence; rdtsc; lfence). Whatever clock the recorder stamps an event
// with, the call happened inside [before, after], read without CLOCK_MONOTONIC.
#pragma once
#include <cstdint>

struct TruthBracket {
  uint64_t channel, tuple, before, after;
};
static_assert(sizeof(TruthBracket) == 32);
