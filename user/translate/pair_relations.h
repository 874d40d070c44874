// The relations of every ordered node pair that has rounds or matched packets:
// ratio and hull (or the rate-bounded piecewise relation), the one chosen under
// --method, why a pair has none; their physics check (sync_sanity.h) and their
// entries in meta.json "translated" "pairs".
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"
#include "translate/drift_bound.h"
#include "translate/hull_sync.h"
#include "translate/pair_inputs.h"
#include "translate/ratio_sync.h"
#include "translate/sync_sanity.h"
#include "translate/translate_nodes.h"
#include "translate/translate_options.h"

namespace cptrace {

// Relations of the ordered pair from -> to, by method.
struct NodePair {
  size_t from = 0, to = 0;
  PairRounds rounds;
  std::optional<RatioSync> ratio;
  std::string ratio_error;
  std::optional<HullSync> hull;
  std::shared_ptr<const DriftBoundRelation> drift;  // --clock-model piecewise
  PairInputs inputs;  // what the rounds and the matched traffic can each bound
  RelationPtr chosen;  // under the requested method
  std::string why_none;
  RelationPtr ratio_relation() const { return ratio ? ratio->relation : nullptr; }
};

// Keyed by (from, to), indices into the nodes.
using PairMap = std::map<std::pair<size_t, size_t>, NodePair>;

// Every ordered pair with rounds or packets, each first checked to be of these
// recordings (check_matching).
PairMap build_pairs(const std::vector<TranslateNode>& nodes, const TranslateOptions& opt, const PacketMatches& packets);
// A pair's entry in meta.json "translated" "pairs".
nlohmann::json pair_json(const std::vector<TranslateNode>& nodes, const NodePair& p);
// The physics check of every node pair's rounds (sync_sanity.h), once per
// unordered pair (the two directions hold the same rounds mirrored). With
// --method ratio, hulls that cross are a finding too: the ratio's one line
// ignores the split.
nlohmann::json check_sync(const std::vector<TranslateNode>& nodes, const PairMap& pairs, Method method,
                          std::vector<SyncFinding>& findings);

// The relation a node pair is translated with under `method`, from its ratio and
// hull relations (either may be null): the one asked for; under best, both hold,
// so their intersection, except where the hulls cross (not hull_linear): the
// ratio's one line contradicts the rounds there and the split hull is used.
// translate and pair_relation both decide through this.
RelationPtr choose_relation(Method method, const RelationPtr& ratio, const RelationPtr& hull, bool hull_linear);

// The relation of a pair entry of the translated meta.json under `method`
// (null when that method has none for the pair).
RelationPtr pair_relation(const nlohmann::json& pair, Method method);

}  // namespace cptrace
