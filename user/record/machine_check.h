// `cptrace check`: can this machine record? One pass/fail/warn line per thing a
// recording needs (root, BTF, uprobes, ring buffers, probe-site cost, fork
// safety, TSC trust and skew, clock discipline), each tried or measured here
// rather than inferred, then a verdict. It lives in record/ because it runs
// what a recording runs: the probes' self-tests and record's TSC skew measure.
#pragma once

namespace cptrace {

// Prints the lines and the verdict on stdout; 1 when a required line failed.
int run_check();

}  // namespace cptrace
