// `cptrace latency DIR --from CHANNEL --to CHANNEL`: the rows of a translated
// trace or of one node's own (latency_source.h) printed as the summary, --csv or
// --json. The CLI parses the options into LatencyOptions and calls run_latency.
#pragma once
#include <string>
#include <vector>

#include "latency/latency.h"
#include "tables/memory_budget.h"
#include "tables/output_form.h"

namespace cptrace {

struct SyncFinding;

struct LatencyOptions {
  std::string dir, from, to;
  Output output = Output::Text;
  // Prints bounds of a trace translated with --accept-suspect-sync (default:
  // refuse), with one WARNING line per finding.
  bool accept_suspect_sync = false;
  MemoryBudget budget;
};
int run_latency(const LatencyOptions& o);

// What run_latency prints of `res`, however its rows were obtained: the
// summary, --csv or --json on stdout, then the notes (and one WARNING line per
// finding). json: the summary as JSON (latency_summary.h) on stdout, the notes
// on stderr.
int print_latency(const LatencyResult& res, const std::string& from, const std::string& to, Output output,
                  const std::vector<SyncFinding>& suspect);

}  // namespace cptrace
