// Test-only simulated clock (`--simulate-clock OFFSET_NS,SKEW_PPM`).
//
// All namespaces of the testbed share one physical TSC, so translation could never
// be wrong there. To test it against ground truth, a node can pretend its TSC runs
// at a different offset and rate: ONE transform is applied to every timestamp the
// node writes (correlation-stream ClockPoint::tsc — so kernel-timestamped events
// follow when a reader converts mono -> TSC —, TSC-timebase events, SyncRound
// stamps, meta.json's start/stop tsc). Never use it on a real recording.
//
// Formula, in integer ticks (exact, no floating point at apply/undo time):
//
//   sim(x) = x + offset_ticks + floor((x - anchor_tsc) * skew_ppb / 1e9)
//
// anchor_tsc is 0 (TSC reset at boot): the transform is then a function of the
// node alone, identical in every process of the node (record, minrttd, sync), so a
// round's t2/t3 from a standalone responder use the same transform as that node's
// recording. offset_ticks = round(offset_ns * tsc_hz / 1e9), skew_ppb =
// round(skew_ppm * 1000); both integers are written into meta.json
// ("simulated_clock") and are what apply()/undo() use. The result saturates at 0
// and UINT64_MAX.
//
// A rate change (`--simulate-clock OFFSET_NS,SKEW_PPM,CHANGE_TSC,SKEW2_PPM`): from
// the physical TSC value change_tsc on, the skew is skew2_ppb instead (a clock
// whose rate changes mid-run, which no single line relates to another clock):
//
//   sim(x) = x + offset_ticks + floor(((min(x, c) - anchor_tsc) * skew_ppb
//                                      + max(x - c, 0) * skew2_ppb) / 1e9)     c = change_tsc
//
// continuous at c. change_tsc is a TSC value, not a time, so that every process of
// the node changes rate at exactly the same tick (a test reads the TSC and adds).
//
// apply() is monotone non-decreasing (strictly increasing for skew >= 0).
// undo(y) = the largest x with apply(x) <= y, so undo(apply(x)) == x exactly for
// skew >= 0; for skew < 0 the map shrinks and two neighbouring ticks may share an
// image once every 1e9/|skew_ppb| ticks: undo(apply(x)) is then x or x + 1.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "os/time_units.h"

namespace cptrace {

struct ClockTransform {
  bool enabled = false;
  int64_t offset_ticks = 0;
  int64_t skew_ppb = 0;
  uint64_t anchor_tsc = 0;
  bool has_change = false;  // a rate change at change_tsc
  uint64_t change_tsc = 0;
  int64_t skew2_ppb = 0;
  double skew2_ppm = 0;
  // As given on the command line, and the frequency used to turn ns into ticks.
  int64_t offset_ns = 0;
  double skew_ppm = 0;
  double tsc_hz = 0;

  static constexpr int64_t kPpbDen = 1000000000;
  static constexpr double kMaxSkewPpm = 1000;  // keeps the slope within 1 +- 1e-3
  static constexpr int64_t kMaxOffsetNs = 3600 * kNsPerSecond;

  // "OFFSET_NS,SKEW_PPM[,CHANGE_TSC,SKEW2_PPM]" (e.g. "-2500000000,37.5"). Throws std::invalid_argument
  // naming the flag and the bad part.
  static ClockTransform parse(const std::string& spec, double tsc_hz);
  static ClockTransform from_params(int64_t offset_ticks, int64_t skew_ppb, uint64_t anchor = 0);
  // Adds a rate change to skew2_ppb at change_tsc (same limits as the skew).
  ClockTransform& with_change(uint64_t change_tsc, int64_t skew2_ppb);

  uint64_t apply(uint64_t tsc) const;
  uint64_t undo(uint64_t sim) const;

  // meta.json "simulated_clock": {enabled, offset_ns, skew_ppm, tsc_hz,
  // offset_ticks, skew_ppb, anchor_tsc, formula}, and with a rate change
  // change_tsc, skew2_ppb, skew2_ppm.
  nlohmann::json to_json() const;
  // The inverse of to_json (the integer parameters are what counts); a missing or
  // null object gives the identity.
  static ClockTransform from_json(const nlohmann::json& j);
  // The loud warning a node prints when the transform is on.
  std::string warning() const;
};

}  // namespace cptrace
