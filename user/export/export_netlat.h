// `cptrace netlat DIR... --table OUT [--plain|--parquet]`: netlat's packets
// and flows as tables for SQL (DuckDB, Spark, pandas), in the forms of `export
// table` (export_table.h), schema in docs/analysis-export.md:
//   packets   one row per matched packet that passes netlat's filters: exactly
//             the rows of `netlat --csv` (flow, nodes, both kernel stamps, the
//             delay in ticks and ns with its strict bound, guaranteed);
//   flows     one row per flow and node that saw it: what that node sent
//             (retransmitted) and received (out of order), as the summary counts.
// A translated trace holds no packets (translate writes events only), so the
// packet tables come from the node traces, where netlat reads them. A query of
// the packets table grouped by flow and nodes gives netlat's percentiles
// exactly (docs/analysis-export.md, tools/duckdb/examples/flow_p99.sql).
#pragma once
#include <cstdint>
#include <string>

#include "export/export_table.h"
#include "netlat/netlat.h"

namespace cptrace {

struct NetlatTableStats {
  uint64_t packets = 0, flows = 0;
};

// Throws std::runtime_error naming the cause (netlat's errors; an output
// directory that is not empty, unless overwrite). A failed export leaves
// neither table.
NetlatTableStats export_netlat_tables(const NetlatOptions& opt, const std::string& out, TableForm form, bool overwrite);

// `netlat --table OUT`: the tables written, one summary line on stderr; exit 0.
int run_netlat_table(const NetlatOptions& opt, const std::string& out, TableForm form, bool overwrite);

}  // namespace cptrace
