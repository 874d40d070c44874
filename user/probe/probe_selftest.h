// Measures what a uprobe hit costs on this kernel, on probe sites inside the
// cptrace binary itself: a nop5 site (the optimized path) and a site that starts
// with another instruction (the int3 + single-step path). Used by `cptrace check`
// and the benchmarks.
#pragma once
#include <string>

namespace cptrace {

struct UprobeCost {
  double nop5_empty_ns = 0;    // empty BPF program on a nop5 site
  double nop5_record_ns = 0;   // the real cp_logTS program (ring record) on a nop5 site
  double int3_empty_ns = 0;    // empty BPF program on a non-nop5 site
  double no_probe_ns = 0;      // the same call with nothing attached
  std::string error;           // non-empty if the measurement could not run
};

UprobeCost measure_uprobe_cost(int calls = 20000);

}  // namespace cptrace
