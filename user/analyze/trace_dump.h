// `cptrace dump`: every event of a trace as text or CSV, in file order; a
// translated trace prints its events with their instants on the reference.
#pragma once
#include <string>

namespace cptrace {

struct DumpOptions {
  std::string dir;
  bool csv = false;
};

// Prints the events on stdout; what damaged_trace_exit returns (2 when the
// trace is damaged, the events before the bad frame are still printed), else 0.
int run_dump(const DumpOptions& a);

}  // namespace cptrace
