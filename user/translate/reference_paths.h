// Each node's relation to the reference along the tightest path of node pairs
// (relation_paths.h), weighted by the bound width at the middle of the
// from-node's span; a node without a path is an error naming every pair's reason.
#pragma once
#include <string>
#include <vector>

#include "translate/pair_relations.h"

namespace cptrace {

struct ReferencePaths {
  std::vector<RelationPtr> to_ref;  // node -> reference, every one set
  std::vector<std::vector<std::string>> names;  // node, next hop, ..., reference
};

// Throws std::runtime_error for the first node with no path.
ReferencePaths reference_paths(const std::vector<TranslateNode>& nodes, size_t ref, const PairMap& pairs);

}  // namespace cptrace
