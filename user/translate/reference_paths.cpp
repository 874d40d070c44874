// Each node's path to the reference: see reference_paths.h.
#include "translate/reference_paths.h"

#include <stdexcept>

#include <fmt/format.h>

#include "translate/relation_paths.h"

namespace cptrace {
namespace {

// Each node's relation to the reference (relation_paths.h), weighted by the bound
// width at the middle of the from-node's span.
std::vector<RelationPtr> paths_to_reference(const std::vector<TranslateNode>& nodes, size_t ref, const PairMap& pairs,
                                            std::vector<std::vector<std::string>>& path_names) {
  std::map<std::pair<size_t, size_t>, RelationEdge> edges;
  for (const auto& [k, p] : pairs) {
    if (!p.chosen) continue;
    long double w;
    try {
      w = edge_weight(*p.chosen, nodes[p.from].span_lo, nodes[p.from].span_hi, p.rounds);
    } catch (const std::exception&) {
      continue;  // far outside the pair's span: not a usable edge
    }
    // A non-linear pair has transitions where nothing is guaranteed: any linear
    // path, however wide, is preferred.
    if (p.hull && !p.hull->linear && !p.drift && p.chosen != p.ratio_relation()) w += 1e30L;
    edges[k] = {p.chosen, w};
  }
  RelationPaths paths = relation_paths(nodes.size(), ref, edges);
  path_names.assign(nodes.size(), {});
  for (size_t v = 0; v < nodes.size(); ++v)
    for (size_t k : paths.path[v]) path_names[v].push_back(nodes[k].name);
  return paths.to_ref;
}

std::string no_path_error(const std::vector<TranslateNode>& nodes, size_t v, size_t ref, const PairMap& pairs) {
  std::string why;
  for (size_t u = 0; u < nodes.size(); ++u) {
    if (u == v) continue;
    auto it = pairs.find({v, u});
    why += "\n  " + (it == pairs.end()
                         ? pair_name(nodes, v, u) + ": no MinRTT rounds in either trace and no matched packets"
                     : it->second.why_none.empty() ? pair_name(nodes, v, u) + ": usable"
                                                   : it->second.why_none);
  }
  return fmt::format("node \"{}\" ({}) has no path of synchronized node pairs to the reference \"{}\":{}",
                     nodes[v].name, nodes[v].dir, nodes[ref].name, why);
}

}  // namespace

ReferencePaths reference_paths(const std::vector<TranslateNode>& nodes, size_t ref, const PairMap& pairs) {
  ReferencePaths p;
  p.to_ref = paths_to_reference(nodes, ref, pairs, p.names);
  for (size_t v = 0; v < nodes.size(); ++v)
    if (!p.to_ref[v]) throw std::runtime_error(no_path_error(nodes, v, ref, pairs));
  return p;
}

}  // namespace cptrace
