// `cptrace throughput`: user events per period per channel. Periods are aligned
// to the trace origin (trace_timeline.h) and cover the whole trace, from the
// origin (or the earliest event, if one precedes it) to the stop instant (or the
// last event), so an idle period is a 0, not a gap.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_timeline.h"

namespace cptrace {

struct ChannelSeries {
  uint64_t id = 0;
  std::string name;
  std::vector<uint64_t> counts;  // counts[i]: events in period first + i
  uint64_t total = 0;
};

struct Throughput {
  Timeline tl;
  uint64_t period = 0;   // ticks
  double period_ms = 0;  // as asked
  int64_t first = 0;     // index of the first period (negative if events precede the origin)
  size_t periods = 0;
  std::vector<ChannelSeries> channels;  // sorted by name
  double period_start_s(size_t i) const { return tl.ticks_to_s(double(first + int64_t(i)) * double(period)); }
};

// One streaming pass. `only`: restrict to one channel id. Channels of the
// channel table without events are listed with all-zero counts.
Throughput compute_throughput(const TraceReader& r, const Timeline& tl, uint64_t period, double period_ms,
                              std::optional<uint64_t> only = std::nullopt);
nlohmann::json throughput_json(const Throughput& t);

int cmd_throughput(const std::string& dir, const std::string& channel, double period_ms, bool csv, bool json);

}  // namespace cptrace
