// The relations of a set of node traces: see run_relations.h.
#include "translate/run_relations.h"

#include <stdexcept>

namespace cptrace {

RunRelations relate_nodes(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                          const PacketMatches& packets, const std::string& command) {
  RunRelations r;
  r.pairs = build_pairs(nodes, opt, packets);
  // Rounds that contradict physics come first: they are why any later step fails.
  r.checks = check_sync(nodes, r.pairs, opt.method, r.findings);
  if (!r.findings.empty() && !opt.accept_suspect_sync)
    throw std::runtime_error(suspect_sync_error(r.findings, command));
  r.paths = reference_paths(nodes, ref, r.pairs);
  return r;
}

Ranges node_transitions(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                        const RunRelations& rel, size_t v) {
  if (v == ref || opt.method == Method::Ratio || opt.clock_model != ClockModel::Linear) return {};
  size_t hop = 0;
  while (nodes[hop].name != rel.paths.names[v][1]) ++hop;
  const NodePair& p = rel.pairs.at({v, hop});
  return p.hull ? p.hull->transitions() : Ranges{};
}

}  // namespace cptrace
