// `cptrace sink`: the receiver as a command — signals, --duration, the control
// server and the final report.
#pragma once
#include "load/sink.h"

namespace cptrace {

// Receives until SIGINT/SIGTERM, --duration or --rounds, then prints the report;
// 3 when a tuple was lost, duplicated or malformed, else 0.
int run_sink(const SinkOptions& o);

}  // namespace cptrace
