// The report's node sections (overview, throughput, drops per CPU), computed
// from a node's own trace directory exactly as `cptrace throughput` and
// `cptrace info` do.
//
// A translated trace holds every node's events on the reference clock but not
// the nodes' counters, correlation streams or start instants, so its node
// sections come from the node directories it was translated from
// (`report OUT --node-dir A --node-dir B ...`), checked against what the
// translated meta.json says about each node.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "analyze/report_html.h"
#include "trace/trace_reader.h"

namespace cptrace {

// One node's section; no period: auto_period_ms(), lengthened (with a message)
// when events lie far outside the recording.
NodeSection node_report(const TraceReader& r, std::optional<double> period_ms);

// The sections of every node of translated run `run`, in the run's node order,
// one per directory of `node_dirs`, each with its axis on the reference's
// seconds (NodeSection::axis) so that their throughput plots line up. Throws naming the directory when one is not
// a node of the run, names a node twice, or disagrees with the run about its
// event count, and naming the nodes left without a directory.
std::vector<NodeSection> run_node_sections(const TraceReader& run, const std::vector<std::string>& node_dirs,
                                           std::optional<double> period_ms);

}  // namespace cptrace
