// `cptrace latency`: the summary table, --csv and --json of a channel pair's rows.
#include "latency/latency_command.h"

#include <cstdio>
#include <iterator>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "latency/latency_source.h"
#include "latency/latency_summary.h"
#include "os/say.h"
#include "trace/trace_reader.h"
#include "translate/sync_sanity.h"
#include "translate/unauthenticated_rounds.h"

namespace cptrace {

namespace {

void summary_line(const std::string& what, const LatencyColumns& cols, const LatencyColumns::Group& g,
                  ValueColumn LatencyColumns::Leaf::*col, const char* unit) {
  uint64_t n = LatencyColumns::count(g);
  if (!n) return;
  using P = LatencyColumns::Pct;
  const std::vector<P::Field> shown{&P::min, &P::p50, &P::p90, &P::p99, &P::max};
  cols.select_together(g, {{&LatencyColumns::Leaf::value, shown}, {&LatencyColumns::Leaf::width, shown}});
  const P p = cols.percentiles(g, col, shown);
  fmt::print("  {:<44} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", what, n, p.min, p.p50, p.p90, p.p99, p.max,
             unit);
}

void print_summary(const LatencyResult& res, const std::string& from, const std::string& to) {
  const char* unit = res.have_ns ? "ns" : "ticks";
  fmt::print("latency {} -> {}: {} tuples\n", from, to, res.row_count);
  fmt::print("  {:<44} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "", "count", "min", "p50", "p90", "p99", "max");
  LatencyColumns cols(res);
  std::map<std::string, LatencyColumns::Group> by;
  for (const auto& l : cols.leaves()) {
    by[l->local() ? "local (same node)" : "remote (two nodes)"].push_back(l.get());
    by["  scenario " + l->scenario].push_back(l.get());
  }
  summary_line("value (all)", cols, cols.all(), &LatencyColumns::Leaf::value, unit);
  summary_line("bound width (all)", cols, cols.all(), &LatencyColumns::Leaf::width, unit);
  for (auto& [k, g] : by) {
    summary_line(k + " value", cols, g, &LatencyColumns::Leaf::value, unit);
    summary_line(k + " bound width", cols, g, &LatencyColumns::Leaf::width, unit);
  }
}

// One CSV line per row, written in large chunks.
void print_csv(const LatencyResult& res) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "tuple,from_node,to_node,scenario,ticks,ticks_lo,ticks_hi,ns,ns_lo,ns_hi\n");
  res.for_each_row([&](const LatencyRow& r) {
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{},{}\n", r.tuple, res.node_names[r.from_node],
                   res.node_names[r.to_node], r.scenario, r.ticks, r.ticks_lo, r.ticks_hi, r.ns, r.ns_lo, r.ns_hi);
    if (out.size() > (1 << 20)) {
      fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  });
  fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

int run_latency(const LatencyOptions& o) {
  auto r = open_latency_trace(o.dir);
  // Only a translated trace carries findings (none for one node's own).
  std::vector<SyncFinding> suspect = suspect_findings(*r, o.dir, o.accept_suspect_sync);
  return print_latency(latency_rows(*r, o.from, o.to, o.budget), o.from, o.to, o.output, suspect);
}

int print_latency(const LatencyResult& res, const std::string& from, const std::string& to, Output output,
                  const std::vector<SyncFinding>& suspect) {
  const MemoryBudget& budget = res.budget;
  if (output == Output::Json)
    fmt::print("{}\n", latency_summary_json(res, from, to).dump(2));
  else if (output == Output::Csv)
    print_csv(res);
  else
    print_summary(res, from, to);
  fflush(stdout);
  if (res.partitions > 1)
    say("note: the tuples did not fit --memory {} MiB: spilled to {} in {} partitions", budget.bytes >> 20,
        budget.spill_dir(), res.partitions);
  FILE* o = notes_stream(output);
  fmt::print(o, "unmatched: {} tuples on {} only, {} on {} only; repeated tuple ids: {} on {}, {} on {} (first used)\n",
             res.from_only, from, res.to_only, to, res.from_duplicates, from, res.to_duplicates, to);
  if (!res.have_ns) fmt::print(o, "note: reference TSC frequency unknown; durations in ticks\n");
  for (const SyncFinding& f : suspect) fmt::print(o, "{}\n", suspect_sync_warning(f));
  if (!res.unauthenticated.empty()) fmt::print(o, "{}\n", unauthenticated_warning(res.unauthenticated));
  return 0;
}

}  // namespace cptrace
