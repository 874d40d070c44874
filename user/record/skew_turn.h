// One recorder of this machine at a time measures the TSC skew across CPUs
// (clock/tsc_skew.h). Recorders started together (a cluster's nodes on one
// machine, each in its network namespace) measured together, and their pinned
// threads, real-time in the retries, took the CPUs from one another: in 64-node
// runs on 2 vCPUs a node's start interval came out 28-91 ms wide, and with it
// every bound of that node, however many retries. A measure alone takes a few ms.
//
// The turn is an flock on /run/cptrace/tsc-skew.lock (a root-owned directory,
// no symlink followed). Waiting is bounded: past `max_wait`, or where the lock
// cannot be had at all (a container with its own /run), the measure goes ahead
// unturned, as before, its retries still there.
#pragma once
#include <chrono>

#include "clock/tsc_skew.h"

namespace cptrace {

class SkewTurn {
 public:
  explicit SkewTurn(std::chrono::milliseconds max_wait = std::chrono::seconds(3));
  ~SkewTurn();
  SkewTurn(const SkewTurn&) = delete;
  SkewTurn& operator=(const SkewTurn&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// measure_tsc_skew() with its default budget, in this machine's turn.
TscSkew measure_tsc_skew_in_turn();

}  // namespace cptrace
