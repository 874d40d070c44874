// The controller's poll loop over every agent's stream while the nodes record:
// copies, broken streams taken up again, the stop (Ctrl-C, --duration, the
// workloads' end) and the release of the held responders.
#pragma once
#include <functional>
#include <vector>

#include "cluster/controller.h"
#include "cluster/node_run.h"
#include "os/stop_signals.h"

namespace cptrace::cluster {

// The poll loop over every agent's stream until all have ended; the run's
// length in seconds (until the stop, or until the last stream ended).
// states_changed: called when a node's live_state_of changed.
double stream_run(std::vector<NodeRun>& nodes, const ClusterRecordOptions& o, const StopSignals& signals,
                  const std::function<void()>& states_changed);

}  // namespace cptrace::cluster
