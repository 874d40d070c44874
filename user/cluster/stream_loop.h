// The controller's poll loop over every agent's stream while the nodes record:
// copies, broken streams taken up again, the stop (Ctrl-C, --duration, the
// workloads' end) and the release of the held responders.
#pragma once
#include <signal.h>

#include <functional>
#include <vector>

#include "cluster/controller.h"
#include "cluster/node_run.h"

namespace cptrace::cluster {

// Ctrl-C and SIGTERM, while it lives, wake the loop through a self-pipe
// (pipe_fds[0]) instead of killing the controller: the nodes are stopped in order.
struct SignalScope {
  int pipe_fds[2];
  struct sigaction old_int, old_term;
  SignalScope();
  ~SignalScope();
};

// The poll loop over every agent's stream until all have ended; the run's
// length in seconds (until the stop, or until the last stream ended).
// states_changed: called when a node's live_state_of changed.
double stream_run(std::vector<NodeRun>& nodes, const ClusterRecordOptions& o, int wake_fd,
                  const std::function<void()>& states_changed);

}  // namespace cptrace::cluster
