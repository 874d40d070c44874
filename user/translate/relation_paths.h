// Each node's relation to the reference along the tightest path of node pairs:
// Dijkstra from the reference over edge weights (translate: the bound width at the
// middle of the from-node's span), the hops composed conservatively
// (ComposedRelation). translate and the live view of a run (analyze/run_view.h)
// both choose their paths here, so a finished run gets the same paths in both.
#pragma once
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "translate/clock_relation.h"
#include "translate/sync_pairs.h"

namespace cptrace {

// The relation of the ordered pair from -> to and its weight.
struct RelationEdge {
  RelationPtr relation;
  long double weight = 0;
};

struct RelationPaths {
  std::vector<RelationPtr> to_ref;  // null: no path
  std::vector<std::vector<size_t>> path;  // node, next hop, ..., reference (empty: no path)
};

// edges keyed by (from, to); nodes 0..n-1.
RelationPaths relation_paths(size_t n, size_t ref, const std::map<std::pair<size_t, size_t>, RelationEdge>& edges);

// An edge's weight: the width of its bound at the middle of the from-node's
// clock span [span_lo, span_hi], else (no span yet) at an instant of the pair's
// first round, else at 0. In long double: far from its rounds a bound can be
// wider than an int64 holds. Throws as Relation::at (then no usable edge).
long double edge_weight(const Relation& r, int64_t span_lo, int64_t span_hi, const PairRounds& rounds);

}  // namespace cptrace
