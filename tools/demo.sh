#!/usr/bin/env bash
# `make demo`: record the built-in workload (4 threads, 3 channels, single and
# batch paths) with cptrace and print what the trace holds.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
out=$(mktemp -d /tmp/cptrace-demo.XXXXXX)
trap 'rm -rf "$out"' EXIT

if [[ $(id -u) -ne 0 ]]; then
  echo "demo: recording needs root (sudo make demo)" >&2
  exit 1
fi
$B/cptrace check
for mode in single batch; do
  echo
  echo "== recording the workload, $mode path: 4 threads x 250000 events on 3 channels"
  $B/cptrace record --no-progress -o "$out/$mode" -- \
    $B/tests/workload --threads 4 --events 250000 --channels 3 --mode $mode >"$out/$mode.json"
  $B/cptrace info "$out/$mode"
  echo "-- first events (CSV, ts in TSC ticks):"
  $B/cptrace dump --csv "$out/$mode" >"$out/$mode.csv"   # (no pipe into head: SIGPIPE)
  head -4 "$out/$mode.csv"
  echo "   ... $(($(wc -l <"$out/$mode.csv") - 1)) events in all"
done
