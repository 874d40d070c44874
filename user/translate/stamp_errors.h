// The own errors of one node's stamps (TraceEvent::ts_err: a converted kernel
// stamp's conversion error, the TSC skew across CPUs), as a same-node duration
// needs them: two stamps of one node are each within their own error of the
// node's reference-CPU clock, so their difference is within the sum of both.
// A stamp that names its CPU carries that CPU's skew only
// (trace/tsc_skew_history.h), so the largest error is kept per CPU for such
// stamps, beside the largest over all: a duration between the reference CPU and
// CPU 1 is widened by CPU 1's interval once, not by the widest CPU's twice.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/tsc_skew_history.h"

namespace cptrace {

class StampErrors {
 public:
  // One stamp: its own error, and its CPU where it names one. Inline: translate
  // adds every event of a node.
  void add(uint64_t err, bool cpu_stamped, uint16_t cpu) {
    any_ = std::max(any_, err);
    if (!cpu_stamped) return;
    if (cpu >= cpus_.size()) cpus_.resize(size_t(cpu) + 1, kNone);
    cpus_[cpu] = cpus_[cpu] == kNone ? err : std::max(cpus_[cpu], err);
  }
  void merge(const StampErrors& o) {
    any_ = std::max(any_, o.any_);
    for (size_t c = 0; c < o.cpus_.size(); ++c)
      if (o.cpus_[c] != kNone) add(o.cpus_[c], true, uint16_t(c));
  }
  // The largest over every stamp.
  uint64_t any() const { return any_; }
  // The largest own error of a stamp like this one: its CPU's, where it names
  // a CPU that was seen; else the largest over all (a bound for any stamp).
  uint64_t of(bool cpu_stamped, uint16_t cpu) const {
    return cpu_stamped && cpu < cpus_.size() && cpus_[cpu] != kNone ? cpus_[cpu] : any_;
  }
  // {"CPU": error, ...} for the CPUs seen, each capped at `cap`; and back (a
  // malformed entry is skipped: its stamps then count with the largest error).
  nlohmann::json per_cpu_json(uint64_t cap) const {
    nlohmann::json j = nlohmann::json::object();
    for (size_t c = 0; c < cpus_.size(); ++c)
      if (cpus_[c] != kNone) j[std::to_string(c)] = std::min(cpus_[c], cap);
    return j;
  }
  // What the reader gives a recording's stamps of their skew alone (a live
  // view's, before translate has seen the events): TscSkewHistory::err_on.
  static StampErrors from_skew(const TscSkewHistory& h) {
    StampErrors e;
    e.any_ = h.err;
    if (h.reference_cpu && *h.reference_cpu >= 0 && *h.reference_cpu <= 0xffff)
      e.add(0, true, uint16_t(*h.reference_cpu));
    for (const auto& [cpu, err] : h.cpu_err)
      if (cpu >= 0 && cpu <= 0xffff) e.add(h.err_on(cpu), true, uint16_t(cpu));
    return e;
  }
  static StampErrors from_json(uint64_t any, const nlohmann::json& per_cpu) {
    StampErrors e;
    e.any_ = any;
    if (!per_cpu.is_object()) return e;
    for (const auto& [k, v] : per_cpu.items()) {
      size_t used = 0;
      unsigned long c = 0;
      try {
        c = std::stoul(k, &used);
      } catch (const std::exception&) {
        continue;
      }
      if (used != k.size() || c > std::numeric_limits<uint16_t>::max() || !v.is_number_unsigned()) continue;
      // One CPU's stamps are among all: their largest is at most `any`.
      e.add(std::min(v.get<uint64_t>(), any), true, uint16_t(c));
    }
    return e;
  }

 private:
  static constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();  // no stamp of that CPU
  uint64_t any_ = 0;
  std::vector<uint64_t> cpus_;  // per CPU: the largest error of a stamp naming it, or kNone
};

}  // namespace cptrace
