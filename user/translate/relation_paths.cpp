// Dijkstra from the reference over node-pair relations.
#include "translate/relation_paths.h"

#include <cmath>
#include <functional>
#include <memory>
#include <queue>

namespace cptrace {

RelationPaths relation_paths(size_t n, size_t ref, const std::map<std::pair<size_t, size_t>, RelationEdge>& edges) {
  std::vector<long double> dist(n, INFINITY);
  RelationPaths out;
  std::vector<RelationPtr>& rel = out.to_ref;
  rel.assign(n, nullptr);
  std::vector<size_t> next(n, n);
  using Item = std::pair<long double, size_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  dist[ref] = 0;
  rel[ref] = std::make_shared<IdentityRelation>();
  q.push({0, ref});
  while (!q.empty()) {
    auto [d, u] = q.top();
    q.pop();
    if (d > dist[u]) continue;
    for (size_t v = 0; v < n; ++v) {
      auto it = edges.find({v, u});
      if (v == u || it == edges.end() || !it->second.relation) continue;
      long double w = it->second.weight;
      if (d + w < dist[v]) {
        dist[v] = d + w, next[v] = u;
        rel[v] = u == ref ? it->second.relation : std::make_shared<ComposedRelation>(it->second.relation, rel[u]);
        q.push({dist[v], v});
      }
    }
  }
  out.path.assign(n, {});
  for (size_t v = 0; v < n; ++v)
    for (size_t k = v; k < n && rel[v]; k = k == ref ? n : next[k]) out.path[v].push_back(k);
  return out;
}

long double edge_weight(const Relation& r, int64_t span_lo, int64_t span_hi, const PairRounds& rounds) {
  int64_t at = 0;
  if (span_hi > span_lo) {
    at = int64_t(span_lo + (__int128(span_hi) - span_lo) / 2);
  } else if (!rounds.rounds.empty()) {
    const PairRound& first = rounds.rounds.front();  // an instant of the from-node near its recording
    at = first.x_initiated ? first.t1 : first.t2;
  }
  Bound b = r.at(at);
  return (long double)b.hi - (long double)b.lo;
}

}  // namespace cptrace
