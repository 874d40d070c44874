// The summary of `cptrace latency`: nearest-rank percentiles and their bounds.
#include "latency/latency_summary.h"

#include "tables/parallel_for.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace cptrace {

LatencyColumns::LatencyColumns(const LatencyResult& res) : LatencyColumns(res, 0.25) {
  res.for_each_row([&](const LatencyRow& r) { add(r); });
}

LatencyColumns::LatencyColumns(const LatencyResult& res, double pool_share)
    : pool_{res.budget.share(pool_share).bytes, 0},
      select_bytes_(res.budget.share(0.3).bytes),
      threads_(res.budget.thread_count()),
      dir_(res.budget.spill_dir()),
      ns_(res.have_ns) {}

void LatencyColumns::add(const LatencyRow& r) {
  Leaf* l = last_;
  if (!l || l->from_node != r.from_node || l->to_node != r.to_node || last_scenario_ != r.scenario) {
    Leaf*& found = index_[{r.from_node, r.to_node, r.scenario}];
    if (!found) {
      leaves_.push_back(std::make_unique<Leaf>(pool_, dir_));
      found = leaves_.back().get();
      found->from_node = r.from_node, found->to_node = r.to_node, found->scenario = r.scenario;
    }
    l = last_ = found;
    last_scenario_ = r.scenario;
  }
  int64_t lo = ns_ ? r.ns_lo : r.ticks_lo, hi = ns_ ? r.ns_hi : r.ticks_hi;
  l->value.add(ns_ ? r.ns : r.ticks);
  l->lo.add(lo);
  l->hi.add(hi);
  l->width.add(hi - lo);
}

LatencyColumns::Group LatencyColumns::all() const {
  Group g;
  for (const auto& l : leaves_) g.push_back(l.get());
  return g;
}

uint64_t LatencyColumns::count(const Group& g) {
  uint64_t n = 0;
  for (const Leaf* l : g) n += l->value.size();
  return n;
}

LatencyColumns::Key LatencyColumns::key(const Group& g, ValueColumn Leaf::*col,
                                        const std::vector<Pct::Field>& fields) const {
  std::vector<const ValueColumn*> cols;
  for (const Leaf* l : g) cols.push_back(&(l->*col));
  std::sort(cols.begin(), cols.end());  // a group's leaves in any order are the same values
  return {cols, Pct::ranks(count(g), fields)};
}

LatencyColumns::Pct LatencyColumns::percentiles(const Group& g, ValueColumn Leaf::*col,
                                                const std::vector<Pct::Field>& fields) const {
  Key k = key(g, col, fields);
  auto it = selected_.find(k);
  if (it == selected_.end()) it = selected_.emplace(k, select_ranks(k.first, k.second, select_bytes_)).first;
  Pct p;
  Pct::fill(p, fields, it->second, [](int64_t v) { return v; });
  return p;
}

void LatencyColumns::select_together(const Group& g, const std::vector<Ask>& asks) const {
  std::vector<Key> todo;
  for (const Ask& a : asks) {
    Key k = key(g, a.first, a.second);
    if (!selected_.count(k) && std::find(todo.begin(), todo.end(), k) == todo.end()) todo.push_back(k);
  }
  const uint64_t n = count(g);
  // Each selection in memory copies its n values: together only when all
  // copies fit the selection's share (the same memory as one at a time).
  if (todo.size() < 2 || threads_ < 2 || n * sizeof(int64_t) * todo.size() > select_bytes_) return;
  std::vector<std::vector<int64_t>> got(todo.size());
  parallel_for(threads_, todo.size(), [&](size_t i, unsigned) {
    got[i] = select_ranks(todo[i].first, todo[i].second, select_bytes_ / todo.size());
  });
  for (size_t i = 0; i < todo.size(); ++i) selected_.emplace(std::move(todo[i]), std::move(got[i]));
}

nlohmann::json LatencyColumns::group_json(const Group& g) const {
  nlohmann::json j{{"count", count(g)}};
  if (!count(g)) return j;
  using P = Pct;
  const std::vector<P::Field> values{&P::min, &P::p50, &P::p90, &P::p99, &P::max};
  const std::vector<P::Field> bounds{&P::p50, &P::p90, &P::p99};
  const std::vector<P::Field> widths{&P::p50, &P::p90, &P::p99, &P::max};
  select_together(g, {{&Leaf::value, values}, {&Leaf::lo, bounds}, {&Leaf::hi, bounds}, {&Leaf::width, widths}});
  const P v = percentiles(g, &Leaf::value, values);
  const P lo = percentiles(g, &Leaf::lo, bounds);
  const P hi = percentiles(g, &Leaf::hi, bounds);
  const P w = percentiles(g, &Leaf::width, widths);
  j["min"] = v.min;
  const std::pair<const char*, P::Field> named[] = {{"p50", &P::p50}, {"p90", &P::p90}, {"p99", &P::p99}};
  for (const auto& [name, f] : named) {
    j[name] = v.*f;
    j[std::string(name) + "_lo"] = lo.*f;
    j[std::string(name) + "_hi"] = hi.*f;
    j["width_" + std::string(name)] = w.*f;
  }
  j["max"] = v.max;
  j["width_max"] = w.max;
  return j;
}

nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to) {
  return latency_summary_json(res, from, to, LatencyColumns(res));
}

nlohmann::json latency_summary_json(const LatencyResult& res, const std::string& from, const std::string& to,
                                    const LatencyColumns& cols) {
  std::map<std::pair<uint16_t, uint16_t>, LatencyColumns::Group> hops;
  std::map<std::string, LatencyColumns::Group> scenarios;
  for (const auto& l : cols.leaves()) {
    hops[{l->from_node, l->to_node}].push_back(l.get());
    scenarios[l->scenario].push_back(l.get());
  }
  nlohmann::json j{{"from", from},
                   {"to", to},
                   {"unit", res.have_ns ? "ns" : "ticks"},
                   {"from_only", res.from_only},
                   {"to_only", res.to_only},
                   {"from_duplicates", res.from_duplicates},
                   {"to_duplicates", res.to_duplicates},
                   {"all", cols.group_json(cols.all())},
                   {"hops", nlohmann::json::array()},
                   {"scenarios", nlohmann::json::array()}};
  for (auto& [nodes, g] : hops) {
    nlohmann::json h{{"from_node", res.node_names[nodes.first]}, {"to_node", res.node_names[nodes.second]}};
    h.update(cols.group_json(g));
    j["hops"].push_back(h);
  }
  for (auto& [name, g] : scenarios) {
    nlohmann::json s{{"scenario", name}};
    s.update(cols.group_json(g));
    j["scenarios"].push_back(s);
  }
  return j;
}

}  // namespace cptrace
