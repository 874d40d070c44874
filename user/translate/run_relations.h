// The clock relations of a set of node traces, as translate computes them before
// it writes anything: every pair's relations, their physics check, each node's
// path to the reference and where its first hop is not linear. translate and
// the commands that answer from the recorded traces themselves (`netlat`, whose
// packets translate does not write) share this, so both get the same bounds.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/frame_rewrite.h"  // Ranges
#include "translate/reference_paths.h"

namespace cptrace {

struct RunRelations {
  PairMap pairs;
  nlohmann::json checks;  // check_sync's report
  std::vector<SyncFinding> findings;
  ReferencePaths paths;
};

// Throws std::runtime_error when rounds contradict physics (unless
// opt.accept_suspect_sync; `command` names who refuses) or a node has no path.
RunRelations relate_nodes(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                          const PacketMatches& packets, const std::string& command);

// Local clock ranges of node v where the first hop of its path is non-linear
// (hull transitions, linear clock model only): bounds there are not guaranteed.
Ranges node_transitions(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                        const RunRelations& rel, size_t v);

}  // namespace cptrace
