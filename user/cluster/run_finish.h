// The end of a cluster run: translated onto the reference node (the code path
// of `cptrace translate`), the per-hop summary of --path, RUN/report.html.
#pragma once
#include <string>
#include <vector>

#include "cluster/node_run.h"

namespace cptrace::cluster {

// translate (the code path of `cptrace translate`), the summary and the report.

int finish_run(const std::string& run, const std::string& path, std::vector<NodeRun>& nodes, double run_s);

}  // namespace cptrace::cluster
