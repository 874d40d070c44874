// cptrace latency: per-tuple durations between two channels, with bounds.
#include "translate/latency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "cptrace.h"  // cp_channel_id
#include "translate/clock_relation.h"
#include "translate/latency_stats.h"
#include "trace/trace_reader.h"
#include "translate/sync_sanity.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using nlohmann::json;

struct Stamp {
  uint64_t local = 0;
  int64_t est = 0, lo = 0, hi = 0;
  uint16_t node = 0;
};

class Scenarios {
 public:
  explicit Scenarios(const json& tr) {
    const std::string method = tr.at("method").get<std::string>();
    std::map<std::string, size_t> index;
    for (const json& n : tr.at("nodes")) {
      index[n.at("node").get<std::string>()] = to_ref_.size();
      names_.push_back(n.at("node").get<std::string>());
      to_ref_.push_back(relation_from_json(n.at("to_reference")));
    }
    ref_ = index.at(tr.at("reference").get<std::string>());
    for (const json& p : tr.at("pairs")) {
      RelationPtr r = pair_relation(p, method);
      if (r) direct_[{index.at(p.at("from").get<std::string>()), index.at(p.at("to").get<std::string>())}] = r;
    }
  }
  const std::vector<std::string>& names() const { return names_; }

  Bound duration(const Stamp& a, const Stamp& b, const char*& scenario) const {
    int64_t d = int64_t(b.local - a.local);
    if (a.node == b.node) {
      scenario = a.node == ref_ ? "local-reference" : "local";
      return a.node == ref_ ? Bound{d, d, d} : to_ref_[a.node]->scale({d, d, d}, int64_t(a.local));
    }
    // Instant bounds are exact for the reference (lo = est = hi = local).
    Bound via{b.lo - a.hi, b.est - a.est, b.hi - a.lo};
    if (a.node == ref_ || b.node == ref_) {
      scenario = "reference-remote";
      return via;
    }
    auto it = direct_.find({a.node, b.node});
    if (it == direct_.end()) {
      scenario = "remote-remote-via-reference";
      return via;
    }
    scenario = "remote-remote-direct";
    Bound g = it->second->at(int64_t(a.local));
    int64_t t = int64_t(b.local);
    Bound on_b{t - g.hi, t - g.est, t - g.lo};
    return intersect(to_ref_[b.node]->scale(on_b, t), via, "remote-remote duration");
  }

 private:
  std::vector<std::string> names_;
  std::vector<RelationPtr> to_ref_;
  std::map<std::pair<size_t, size_t>, RelationPtr> direct_;
  size_t ref_ = 0;
};

// By full name (its hash is the id, whatever the trace kept of the name) or label.
uint64_t find_channel(const TraceReader& r, const std::string& name) {
  if (r.channels().count(cp_channel_id(name.c_str()))) return cp_channel_id(name.c_str());
  for (const auto& [id, c] : r.channels())
    if (r.channel_name(id) == name) return id;
  std::string have;
  for (const auto& [id, c] : r.channels()) have += (have.empty() ? "" : ", ") + r.channel_name(id);
  throw std::runtime_error("unknown channel \"" + name + "\" (channels in the trace: " + (have.empty() ? "none" : have) + ")");
}

// Ticks -> ns over a frequency interval, rounded outward.
void to_ns(LatencyRow& row, long double hz, long double lo_hz, long double hi_hz) {
  auto conv = [](int64_t t, long double f) { return (long double)t * 1e9L / f; };
  long double lo = row.ticks_lo >= 0 ? conv(row.ticks_lo, hi_hz) : conv(row.ticks_lo, lo_hz);
  long double hi = row.ticks_hi >= 0 ? conv(row.ticks_hi, lo_hz) : conv(row.ticks_hi, hi_hz);
  row.ns_lo = int64_t(std::floor(lo - 1e-6L));
  row.ns_hi = int64_t(std::ceil(hi + 1e-6L));
  row.ns = std::clamp(int64_t(std::llround(conv(row.ticks, hz))), row.ns_lo, row.ns_hi);
}

}  // namespace

std::string unauthenticated_warning(const std::vector<std::string>& pairs) {
  std::string list;
  for (const std::string& p : pairs) list += (list.empty() ? "" : ", ") + p;
  return "WARNING: unauthenticated MinRTT rounds (no --key): " + list +
         "; anyone on their network could have forged them, and the bounds rest on them";
}

LatencyResult latency(const std::string& dir, const std::string& from, const std::string& to) {
  TraceReader r(dir);
  if (!r.meta().contains("translated"))
    throw std::runtime_error(dir + ": not a translated trace (run cptrace translate first)");
  return latency(r, from, to);
}

LatencyResult latency(const TraceReader& r, const std::string& from, const std::string& to) {
  if (!r.meta().contains("translated"))
    throw std::runtime_error(r.events_path() + ": not a translated trace (run cptrace translate first)");
  if (r.error()) throw *r.error();
  const json& tr = r.meta()["translated"];
  Scenarios sc(tr);
  uint64_t cf = find_channel(r, from), ct = find_channel(r, to);
  LatencyResult res;
  res.node_names = sc.names();
  res.method = tr.value("method", "");
  if (tr.contains("unauthenticated_rounds"))
    res.unauthenticated = tr["unauthenticated_rounds"].get<std::vector<std::string>>();
  for (const json& n : tr.at("nodes"))
    if (n.at("node") == tr.at("reference") && n.contains("span_tsc")) res.ref_origin = n["span_tsc"][0].get<uint64_t>();
  std::unordered_map<uint64_t, Stamp> first, second;
  std::vector<uint64_t> order;
  std::vector<TranslatedEvent> evs;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      if (e.kind != uint8_t(EventKind::User)) continue;
      if (e.node >= res.node_names.size()) throw std::runtime_error("translated event names node index beyond meta.json");
      Stamp s{e.local_ts, e.ref_ts, e.ref_lo, e.ref_hi, e.node};
      if (e.channel == cf && !first.emplace(e.tuple, s).second) res.from_duplicates++;
      if (e.channel == ct) {
        if (second.emplace(e.tuple, s).second) order.push_back(e.tuple);
        else res.to_duplicates++;
      }
    }
  });
  const json& f = tr.at("frequency");
  res.have_ns = f.contains("hz_lo");
  res.hz = f.value("hz", 0.0);
  for (uint64_t t : order) {
    auto a = first.find(t);
    if (a == first.end()) {
      res.to_only++;
      continue;
    }
    const Stamp& b = second[t];
    LatencyRow row;
    row.tuple = t, row.from_node = a->second.node, row.to_node = b.node;
    row.from_ref = a->second.est;
    Bound d = sc.duration(a->second, b, row.scenario);
    row.ticks = d.est, row.ticks_lo = d.lo, row.ticks_hi = d.hi;
    if (res.have_ns) to_ns(row, f["hz"].get<double>(), f["hz_lo"].get<double>(), f["hz_hi"].get<double>());
    res.rows.push_back(row);
  }
  res.from_only = first.size() - (res.rows.size());
  return res;
}

namespace {

int64_t pct(std::vector<int64_t>& v, double p) {
  size_t k = std::min(v.size() - 1, size_t(std::ceil(p * double(v.size()))) - (p > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

void summary_line(const char* what, std::vector<int64_t> v, const char* unit) {
  if (v.empty()) return;
  printf("  %-44s %9zu %12lld %12lld %12lld %12lld %12lld  %s\n", what, v.size(), (long long)pct(v, 0),
         (long long)pct(v, 0.5), (long long)pct(v, 0.9), (long long)pct(v, 0.99), (long long)pct(v, 1.0), unit);
}

}  // namespace

// The findings translate accepted (--accept-suspect-sync): an error unless the
// user accepts them here too.
std::vector<SyncFinding> suspect_findings(const std::string& dir, bool accept) {
  TraceReader r(dir);
  std::vector<SyncFinding> fs;
  if (!r.meta().contains("translated")) return fs;
  for (const nlohmann::json& f : r.meta()["translated"].value("suspect_sync", nlohmann::json::array()))
    fs.push_back(SyncFinding::from_json(f));
  if (!fs.empty() && !accept)
    throw std::runtime_error(suspect_sync_error(fs, dir + " (translated with --accept-suspect-sync)"));
  return fs;
}

int cmd_latency(const std::string& dir, const std::string& from, const std::string& to, bool csv,
                bool accept_suspect_sync, bool json_out) {
  if (csv && json_out) throw std::runtime_error("--csv and --json exclude each other");
  std::vector<SyncFinding> suspect = suspect_findings(dir, accept_suspect_sync);
  LatencyResult res = latency(dir, from, to);
  if (json_out) {
    printf("%s\n", latency_stats_json(latency_stats(res, from, to)).dump(2).c_str());
  } else if (csv) {
    printf("tuple,from_node,to_node,scenario,ticks,ticks_lo,ticks_hi,ns,ns_lo,ns_hi\n");
    for (const LatencyRow& r : res.rows)
      printf("%llu,%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld\n", (unsigned long long)r.tuple,
             res.node_names[r.from_node].c_str(), res.node_names[r.to_node].c_str(), r.scenario, (long long)r.ticks,
             (long long)r.ticks_lo, (long long)r.ticks_hi, (long long)r.ns, (long long)r.ns_lo, (long long)r.ns_hi);
  } else {
    const char* unit = res.have_ns ? "ns" : "ticks";
    printf("latency %s -> %s: %zu tuples\n", from.c_str(), to.c_str(), res.rows.size());
    printf("  %-44s %9s %12s %12s %12s %12s %12s\n", "", "count", "min", "p50", "p90", "p99", "max");
    std::map<std::string, std::pair<std::vector<int64_t>, std::vector<int64_t>>> by;
    for (const LatencyRow& r : res.rows) {
      for (const std::string& k : {std::string(r.local() ? "local (same node)" : "remote (two nodes)"),
                                  std::string("  scenario ") + r.scenario}) {
        by[k].first.push_back(res.have_ns ? r.ns : r.ticks);
        by[k].second.push_back(res.have_ns ? r.ns_hi - r.ns_lo : r.ticks_hi - r.ticks_lo);
      }
    }
    std::vector<int64_t> all_v, all_w;
    for (const LatencyRow& r : res.rows) {
      all_v.push_back(res.have_ns ? r.ns : r.ticks);
      all_w.push_back(res.have_ns ? r.ns_hi - r.ns_lo : r.ticks_hi - r.ticks_lo);
    }
    summary_line("value (all)", all_v, unit);
    summary_line("bound width (all)", all_w, unit);
    for (auto& [k, vw] : by) {
      summary_line((k + " value").c_str(), vw.first, unit);
      summary_line((k + " bound width").c_str(), vw.second, unit);
    }
  }
  FILE* o = csv || json_out ? stderr : stdout;
  fprintf(o, "unmatched: %llu tuples on %s only, %llu on %s only; repeated tuple ids: %llu on %s, %llu on %s (first used)\n",
          (unsigned long long)res.from_only, from.c_str(), (unsigned long long)res.to_only, to.c_str(),
          (unsigned long long)res.from_duplicates, from.c_str(), (unsigned long long)res.to_duplicates, to.c_str());
  if (!res.have_ns) fprintf(o, "note: reference TSC frequency unknown; durations in ticks\n");
  for (const SyncFinding& f : suspect) fprintf(o, "%s\n", suspect_sync_warning(f).c_str());
  if (!res.unauthenticated.empty()) fprintf(o, "%s\n", unauthenticated_warning(res.unauthenticated).c_str());
  return 0;
}

}  // namespace cptrace
