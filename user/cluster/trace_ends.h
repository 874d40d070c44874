// Where each lost recorder's events end, and when it was killed, on the
// reference node's clock, from the translated run.
#pragma once
#include <string>
#include <vector>

#include "cluster/node_run.h"

namespace cptrace::cluster {

// Where each lost recorder's events end, on the reference's clock (seconds
// since the reference's recording began), from the translated run: the
// node's last event kept, with its strict bound.
void locate_trace_ends(const std::string& translated, std::vector<NodeRun>& nodes);

}  // namespace cptrace::cluster
