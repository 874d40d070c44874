// `cptrace info`: what one trace holds — per-channel counts, drops and how they
// add up, span, sizes, processes, handler history, TSC trust, clock adjustments,
// MinRTT rounds, network capture — as text or as JSON (the text is printed from
// the JSON, so both say the same).
#pragma once
#include <string>

namespace cptrace {

struct InfoOptions {
  std::string dir;
  bool json = false;  // --json: the machine-readable summary
};

// Prints the summary on stdout; 2 when the trace is damaged (what is readable
// up to the first bad frame is still summarized), else 0.
int run_info(const InfoOptions& opt);

}  // namespace cptrace
