// The analysis and export subcommands (throughput, rates, report, export).
// Each returns the process exit status: 0, or 2 when the trace is damaged (the
// output then covers everything before the first bad frame, as `dump` does).
#pragma once
#include <string>

#include "analyze/report_html.h"
#include "analyze/service_rates.h"
#include "analyze/throughput.h"

namespace cptrace {

// format: ctf, json or csv.
int cmd_export(const std::string& format, const std::string& dir, const std::string& out, bool overwrite);

}  // namespace cptrace
