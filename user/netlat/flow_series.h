// netlat's packets as the report's series: per flow and direction (sender node
// -> receiver node), the bounded one-way delay of every matched packet, drawn
// as a channel pair's durations are (latency_table.h: box plot, CDF, latency
// over time by the transmit's instant on the reference), beside the table that
// `cptrace netlat --json` prints (the same numbers).
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/latency_table.h"
#include "netlat/netlat.h"
#include "tables/memory_budget.h"

namespace cptrace {

struct FlowReport {
  nlohmann::json summary;  // netlat_json(): "flows", "relation", "matching", ... ("writes" with o.writes)
  std::vector<LatencySeries> series;  // one per flow and direction with bounded packets
  std::vector<LatencySeries> write_series;  // o.writes: the same of its writes and datagrams
};

// Every packet's delay is kept in memory until its series is filled (40 bytes
// each, beside netlat's own 24). Packets without a strict bound (a stamp in a
// hull transition) are counted in the summary and left out of the series.
// With o.writes, the application's view too (netlat --writes): each write or
// datagram from its send call's entry to the recv that returned it.
FlowReport flow_report(const NetlatOptions& o, const MemoryBudget& budget);

}  // namespace cptrace
