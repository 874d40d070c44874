// The check before a cluster run starts anything: every node reached through
// its transport, running a cptrace of the controller's own version.
#pragma once
#include <string>
#include <vector>

#include "cluster/node_run.h"

namespace cptrace::cluster {

// This program's `--version` line.
std::string own_version();
// Every node runs its cptrace through its transport and prints our version;
// the problems, each naming its node.
std::vector<std::string> check_nodes(const std::vector<NodeRun>& nodes, const std::string& version, double timeout);

}  // namespace cptrace::cluster
