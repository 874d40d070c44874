#!/usr/bin/env bash
# Bounds against ground truth while the clock is adjusted like an NTP client does
# (tests/integration/test_slew_truth.cpp), each recording SLEW_S seconds (default
# 30; `make test` runs 3): per case, true events and durations inside their bound
# (N of N) and the bound widths, median and max. Prints figures; a case whose
# truth escapes its bound is listed as FAILED, the bench goes on.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
if [[ $(id -u) -ne 0 ]]; then
  echo "   skipped: adjusting the clock and the testbed need root"
  exit 0
fi
(cd "$B" && CPTRACE_SLEW_SECONDS=${SLEW_S:-30} ./cptrace_tests --gtest_filter="${SLEW_FILTER:-SlewTruth.*}" |
   grep -E "^  \[slew\]|^\[ +(OK|FAILED) +\] SlewTruth")
exit 0
