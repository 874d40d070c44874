// `cptrace export FORMAT DIR`: each format's run as the command does it (the
// output checked, the trace written out, one summary line on stderr, the exit
// status). The command line (cli/cmd_export.cpp) gives each format only its own
// options; what is left to check here is what CLI11 cannot say.
#pragma once
#include <string>
#include <vector>

#include "export/export_table.h"
#include "trace/channel_pair.h"
#include "tables/memory_budget.h"

namespace cptrace {

// The formats of one event per record, on one node's clock or a translated run's.
enum class EventFormat { Ctf, Json, Csv };

struct ExportEventsOptions {
  std::string dir;
  std::string out;  // a directory for ctf, a file otherwise
  bool overwrite = false;
};

// Exit status: 0, or 2 when the trace is damaged (what is before the bad frame
// is exported).
int run_export_events(EventFormat format, const ExportEventsOptions& o);

struct ExportTableOptions {
  std::string dir;  // translated
  std::string out;  // directory; or
  std::string stdout_table;  // this one table's plain CSV on stdout, no directory
  std::vector<ChannelPair> pairs;  // latency rows of these
  bool overwrite = false;
  bool accept_suspect_sync = false;  // export a trace translated with --accept-suspect-sync
  TableForm form = TableForm::Zstd;
  MemoryBudget budget;  // for the latency rows
};

// `export table`: a translated trace as tables for SQL (export_table.h).
int run_export_table(const ExportTableOptions& o);

}  // namespace cptrace
