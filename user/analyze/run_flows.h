// `cptrace top RUN --flows`: the one-way delay of every packet matched so far
// between the run's nodes (`record --net`), per flow and direction, with the
// relations the refresh bounds its pairs with (run_view.h): netlat's matching
// (packet_pairs.h) and bounds (packet_delays.h) on the frames written so far.
//
// Each refresh reads the nodes' traces again as they stand (a trace reader
// takes a growing file up to its last complete frame), so it costs O(packets)
// and holds them while it runs: fine for a live view of minutes, not of hours.
// Kernel stamps are put on each node's TSC by the reader's own clock model,
// with its strict errors; a stamp past the node's last clock point waits for
// the next one. Once every trace is complete, the last refresh is exactly
// `netlat --clock-model piecewise --inputs rounds` (ticks).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/tsc_frequency.h"
#include "translate/clock_relation.h"

namespace cptrace {

struct FlowNode {
  std::string dir, name;
  const Relation* to_ref = nullptr;  // null: not related to the reference yet
};

// j["p50"], ["p90"], ["p99"], ["max"] of a live view's bounded values (pairs
// and flows alike): each the nearest-rank element of est, lo and hi in ticks
// (the k-th smallest true value lies between the k-th smallest lo and hi), and
// in ns over `f`. Nothing when est is empty; the columns are reordered.
void add_bounded_percentiles(nlohmann::json& j, std::vector<int64_t>& est, std::vector<int64_t>& lo,
                             std::vector<int64_t>& hi, const std::optional<TscFrequency>& f);

// Per flow and direction: matched packets, bounded, and p50/p90/p99/max in
// reference ticks (and ns over `f`) with strict bounds. Problems (a trace not
// readable yet) are appended to `problems`.
nlohmann::json run_flows(const std::vector<FlowNode>& nodes, const std::optional<TscFrequency>& f,
                         std::vector<std::string>& problems);

}  // namespace cptrace
