// `cptrace maxrate`: the maximum sustainable throughput of whatever sits between
// the generator and the sink. Rounds at R0, R0+S, R0+2S, ... (each a full
// generator run of D seconds with its own id range) until one is not sustained;
// the last sustained rate is the result.
//
// A round at rate R is sustained iff, with tol = --tolerance (default 2%):
//   1. every id the generator emitted reached the sink exactly once (after the
//      sink drained: all arrived, or no tuple for 1 s);
//   2. the backlog did not keep growing: the sink's intake over the second half
//      of the round (least-squares slope of its unique-id count, sampled every
//      10 ms) is at least (1 - tol) R. A constant backlog (a pipeline holding a
//      fixed number of tuples) passes; a consumer slower than R by more than tol
//      fails, whether the backlog piles up in buffers (UDP, or TCP buffers not
//      yet full) or pushes back on the generator (TCP send blocked);
//   3. the generator itself kept up: its achieved rate is at least (1 - tol) R,
//      or it was blocked by the transport (then 2. decides). A generator too slow
//      for R without being blocked ends the search with "generator-limited": the
//      result is then a bound of this generator host, not of the system.
#pragma once
#include <string>
#include <vector>

#include "load/generator.h"
#include "load/sink_control.h"

namespace cptrace {

struct MaxrateOptions {
  GenOptions gen;  // to, size, threads, udp, batch, channel
  std::string control;  // HOST:PORT of the sink's control port ("" : HOST:PORT+1)
  double from = 0, step = 0, duration_s = 0, max = 0;
  double tolerance = 0.02;
  bool json = false;
};

struct MaxrateRound {
  double rate = 0;
  GenReport gen;
  RoundResult sink;
  bool sustained = false;
  std::string verdict;  // "ok" or why not
};

// Sustained or not, and why (the rules above).
bool judge_round(MaxrateRound& r, double tolerance);
int run_maxrate(const MaxrateOptions& o);

}  // namespace cptrace
