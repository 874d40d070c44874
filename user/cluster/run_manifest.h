// What a cluster run says of its nodes: RUN/cluster.json (the manifest
// `gather` reads) and the lines, one per node with something to say, on stderr
// and in the report.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/node_run.h"

namespace cptrace::cluster {

// cluster.json: the run, and per node its spec, state, stream and gap. `live`:
// written while the nodes record (live_state_of; no Done yet, so that a gather
// after a lost controller fetches every node's end).
nlohmann::json manifest(const std::string& run_id, const std::string& path, const std::vector<NodeRun>& nodes,
                        double run_s = -1, bool live = false);
// What happened to each node that is not simply complete, by name: problems
// (`bad` counts those nodes) and the streams that broke and were resumed whole.
std::vector<std::string> node_lines(const std::vector<NodeRun>& nodes, double run_s, int* bad = nullptr);
// Says what happened to each node, by name; the number of nodes with a problem.

int report_nodes(const std::vector<NodeRun>& nodes, double run_s);

}  // namespace cptrace::cluster
