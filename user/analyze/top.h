// `cptrace top DIR`: a live view of a recording in progress, refreshed every
// --interval ms from the frames the recorder has completed (live_view.h), until
// meta.json says the recording is complete or the recorder is gone. DIR may be a
// run instead (RUN/NODE/ per node, run_view.h): per-node counts and cross-node
// latency with strict bounds, until every node's trace is complete.
#pragma once
#include <string>
#include <vector>

#include "trace/channel_pair.h"
#include "tables/memory_budget.h"

namespace cptrace {

struct TopOptions {
  std::string dir;
  double interval_ms = 1000;
  double period_ms = 1000;  // throughput's period, aligned to the trace start
  double wait_s = 10;  // for DIR and its events.cpt to appear
  double gone_s = 5;  // events.cpt not growing this long: the recorder is gone
  long iterations = 0;  // 0: until the recording ends
  bool json = false;
  std::vector<ChannelPair> pairs;  // --pair
  std::string reference;  // a run: the node whose TSC durations are on (default: first by name)
  double max_drift_ppm = 500;  // a run: the clock model's rate bound (run_view.h)
  bool flows = false;  // a run: --flows, every flow's one-way delays (run_flows.h)
  MemoryBudget budget;  // for --pair (local_latency.h: exact within it)
};

// Exit status: 0 the recording completed (or --iterations refreshes were shown),
// 2 the trace is damaged, 3 the recorder stopped without completing it.
int run_top(const TopOptions& o);

}  // namespace cptrace
