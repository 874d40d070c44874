// The summary `cptrace latency` prints (text table or --json): per group of
// tuples (all, per node pair = hop, per scenario) the count, nearest-rank
// percentiles of the durations, of their bound widths, and a strict bound on
// each percentile of the true durations.
//
// Percentile p of n values is the k-th smallest, k = max(1, ceil(p * n)) (p and
// n as doubles): DuckDB's quantile_disc picks the same element, so a SQL query
// over `cptrace export table` gives the same numbers (docs/analysis-export.md).
//
// The bound of a percentile: every true duration d_i lies in [lo_i, hi_i], so
// the k-th smallest d lies between the k-th smallest lo and the k-th smallest hi
// (order statistics are monotone); those two are the percentile's bound.
//
// Memory: the rows are read once into per-(hop, scenario) columns of value, lo,
// hi and width (rank_select.h), a quarter of the result's budget in memory and
// the rest spilled; every group is a union of such leaves, and its percentiles
// are selected exactly, in memory when they fit.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "latency/latency.h"
#include "latency/percentiles.h"
#include "tables/rank_select.h"

namespace cptrace {

class LatencyColumns {
 public:
  struct Leaf {
    uint16_t from_node = 0, to_node = 0;
    std::string scenario;
    ValueColumn value, lo, hi, width;
    Leaf(MemoryPool& p, const std::string& dir) : value(p, dir), lo(p, dir), hi(p, dir), width(p, dir) {}
    bool local() const { return from_node == to_node; }
  };
  using Group = std::vector<const Leaf*>;

  // Reads res's rows once (ns when res.have_ns, else ticks).
  explicit LatencyColumns(const LatencyResult& res);
  // Empty, filled by the caller's own pass over res's rows (add), so that one
  // pass also feeds other statistics (the report's plots beside a path's hop);
  // its columns keep `pool_share` of res's budget in memory.
  LatencyColumns(const LatencyResult& res, double pool_share);
  void add(const LatencyRow& r);
  const std::vector<std::unique_ptr<Leaf>>& leaves() const { return leaves_; }
  Group all() const;

  static uint64_t count(const Group& g);
  // The nearest-rank percentiles `fields` of one column of the group (the
  // others left 0).
  using Pct = Percentiles<int64_t>;
  Pct percentiles(const Group& g, ValueColumn Leaf::*col, const std::vector<Pct::Field>& fields) const;
  // Selects the percentiles of several columns of a group at once, one column a
  // thread, when all their copies fit the selection's memory together (else
  // one after the other, as percentiles() would): percentiles() then answers
  // from what was selected.
  using Ask = std::pair<ValueColumn Leaf::*, std::vector<Pct::Field>>;
  void select_together(const Group& g, const std::vector<Ask>& asks) const;
  // {"count", "min", "p50", "p90", "p99", "max", "p50_lo", "p50_hi", ...,
  //  "width_p50", "width_p90", "width_p99", "width_max"}.
  nlohmann::json group_json(const Group& g) const;

 private:
  using Key = std::pair<std::vector<const ValueColumn*>, std::vector<uint64_t>>;
  Key key(const Group& g, ValueColumn Leaf::*col, const std::vector<Pct::Field>& fields) const;
  MemoryPool pool_;
  uint64_t select_bytes_;
  unsigned threads_;
  std::string dir_;
  bool ns_;
  // Rows come in long runs of one leaf: no lookup for those.
  std::map<std::tuple<uint16_t, uint16_t, const char*>, Leaf*> index_;
  Leaf* last_ = nullptr;
  const char* last_scenario_ = nullptr;
  // Answers already selected, by columns and ranks: the groups "all", a hop and
  // a scenario are often the same leaves, and each costs a pass over them.
  mutable std::map<Key, std::vector<int64_t>> selected_;
  std::vector<std::unique_ptr<Leaf>> leaves_;
};

// The whole summary of one channel pair: from, to, unit, unmatched counts, "all",
// "hops" (per from_node/to_node) and "scenarios".
nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to);
// The same from columns already filled with res's rows.
nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to,
                                    const LatencyColumns& cols);

}  // namespace cptrace
