#!/usr/bin/env bash
# `report` with one path of three hops against one `latency` (called by
# bench/run.sh): on a generated translated three-node run
# (bench/bench_latency_trace.cpp: A.out -> B.in, B.out -> C.in, scrambled ids),
# `latency --from A.out --to C.in --json` and `report --path
# A.out,B.in,B.out,C.in` (three hops and the end-to-end row: four channel
# pairs) run alternately RUNS times; prints each one's median and spread of
# seconds, peak RSS, and the ratio of the medians (the goal: report at most
# 1.5x latency). Figures only. Knobs (environment):
#   REPORT_RATIO_TUPLES  tuples (default 2000000)
#   REPORT_RATIO_RUNS    runs of each command (default 3)
#   REPORT_RATIO_MEMORY  --memory of both (default 1G)
#   REPORT_RATIO_OLD     a previous build's cptrace: its report runs in the same
#                        alternation, its ratio printed beside (default: none)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
N=${REPORT_RATIO_TUPLES:-2000000}
RUNS=${REPORT_RATIO_RUNS:-3}
MEMORY=${REPORT_RATIO_MEMORY:-1G}
OLD=${REPORT_RATIO_OLD:-}
command -v /usr/bin/time >/dev/null || { echo "  skipped: no GNU time (tools/install-deps.sh)"; exit 0; }
tmp=$(mktemp -d -t cptrace-report-ratio.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
$B/bench/bench_latency_trace "$N" "$tmp/run" | sed 's/^/  /'
d=$tmp/run/out

# run NAME CMD...: one timed run, "SECONDS KB" appended to $tmp/NAME.
run() {
  local name=$1; shift
  if ! /usr/bin/time -o "$tmp/time" -f '%e %M %U %S' "$@" >/dev/null 2>"$tmp/err"; then
    echo "  $name: FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; exit 0
  fi
  tail -1 "$tmp/time" | awk '{ print $1, $2 }' >>"$tmp/$name"
  tail -1 "$tmp/time" | awk '{ print $3 + $4 }' >>"$tmp/$name.cpu"
}
# median CPU seconds (user + system) of NAME's runs.
cpu() { sort -n "$tmp/$1.cpu" | awk '{ s[NR] = $1 } END { printf "%.2f\n", s[int((NR + 1) / 2)] }'; }
for ((i = 0; i < RUNS; ++i)); do
  run latency $B/cptrace latency "$d" --from A.out --to C.in --json --memory "$MEMORY"
  run report $B/cptrace report "$d" --path A.out,B.in,B.out,C.in -o "$tmp/report.html" --memory "$MEMORY"
  [[ -z $OLD ]] || run report_old "$OLD" report "$d" --path A.out,B.in,B.out,C.in -o "$tmp/report.html" --memory "$MEMORY"
done
# median, min, max of the seconds; the largest peak RSS.
stats() { sort -n "$tmp/$1" | awk '{ s[NR] = $1; if ($2 > kb) kb = $2 } END {
  printf "%.2f %.2f %.2f %.1f\n", s[int((NR + 1) / 2)], s[1], s[NR], kb / 1024 }'; }
read -r lat lat_lo lat_hi lat_mb < <(stats latency)
read -r rep rep_lo rep_hi rep_mb < <(stats report)
printf "  %-44s %8.2f s median (%.2f-%.2f, %d runs) %8.1f MiB peak RSS\n" \
  "latency A.out -> C.in --json" "$lat" "$lat_lo" "$lat_hi" "$RUNS" "$lat_mb"
printf "  %-44s %8.2f s median (%.2f-%.2f, %d runs) %8.1f MiB peak RSS\n" \
  "report --path A.out,B.in,B.out,C.in" "$rep" "$rep_lo" "$rep_hi" "$RUNS" "$rep_mb"
awk -v r="$rep" -v l="$lat" -v rc="$(cpu report)" -v lc="$(cpu latency)" 'BEGIN {
  printf "    report / latency: %.2f wall (goal: at most 1.5; --memory '"$MEMORY"'), %.2f CPU (%.2f / %.2f s)\n",
    r / (l > 0 ? l : 0.01), rc / (lc > 0 ? lc : 0.01), rc, lc }'
if [[ -n $OLD ]]; then
  read -r old old_lo old_hi old_mb < <(stats report_old)
  printf "  %-44s %8.2f s median (%.2f-%.2f, %d runs) %8.1f MiB peak RSS\n" \
    "report --path ..., previous build" "$old" "$old_lo" "$old_hi" "$RUNS" "$old_mb"
  awk -v r="$old" -v l="$lat" -v rc="$(cpu report_old)" -v lc="$(cpu latency)" 'BEGIN {
    printf "    previous build\x27s report / latency: %.2f wall, %.2f CPU (%.2f / %.2f s)\n",
      r / (l > 0 ? l : 0.01), rc / (lc > 0 ? lc : 0.01), rc, lc }'
fi
