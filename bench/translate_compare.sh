#!/usr/bin/env bash
# `cptrace translate` of two builds (a copy of the previous binary and the
# current one) on generated three-node runs (bench/bench_latency_trace.cpp),
# scrambled and in-order ids: the same bytes (events.cpt, meta.json but for
# its "seconds", stdout but for its time) for every node subset, method and
# clock model asked, and the new build's output the same under every
# --threads; then each build's events/s, old and new alternating in the same
# run (median of RUNS, min-max), per core from the CPU time. Exits 1 on any
# difference. Without OLD only the new build is timed. For each trace, also
# what compressing the translated output costs per event at zstd level 1 (what
# translate writes) and at faster levels (bench/bench_translate_zstd.cpp).
# When the new build has --compression-level: its per-core rate (--threads 1)
# at the default level, at -5 and at zstd's fastest level, each against the
# goal of 10 M events/s per core, and the first of them that reaches it.
#
#   bench/translate_compare.sh [OLD_CPTRACE|-] [NEW_CPTRACE (build/cptrace)] [TUPLES (2500000)] [RUNS (3)]
#
# TUPLES tuples make about 4 x TUPLES events.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:--}
new=${2:-build/cptrace}
n=${3:-2500000}
runs=${4:-3}
[[ $old == - ]] && old=
tmp=$(mktemp -d -t cptrace-translate-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
threads=()
if "$new" translate --help 2>/dev/null | grep -q -- '--threads'; then threads=("--threads 1" "--threads 2" "--threads 3"); fi
levels=()
if "$new" translate --help 2>/dev/null | grep -q -- '--compression-level'; then
  levels=(1 -5 "$(python3 -c 'import ctypes; print(ctypes.CDLL("libzstd.so.1").ZSTD_minCLevel())')")
fi
goal=10  # M events/s per core

fail=0
# One translation's output with what differs run to run taken out.
outputs() {  # outputs DIR STDOUT
  cat "$1/events.cpt"
  grep -v '"seconds"' "$1/meta.json"
  sed -E 's/ in [0-9.]+ s / in S s /; s|'"$tmp"'|TMP|g' "$2"
}
same() {  # same LABEL ARGS...: old (when given) and new under each --threads
  local label=$1; shift
  local ref=$tmp/ref.out
  local variants=("")
  variants+=("${threads[@]}")
  if [[ -n $old ]]; then
    "$old" translate "$@" -o "$tmp/o" -f >"$tmp/stdout" 2>&1 || echo "exit $?" >>"$tmp/stdout"
    outputs "$tmp/o" "$tmp/stdout" >"$ref"
  fi
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    "$new" translate "$@" -o "$tmp/o" -f $v >"$tmp/stdout" 2>&1 || echo "exit $?" >>"$tmp/stdout"
    if [[ ! -f $ref ]]; then
      outputs "$tmp/o" "$tmp/stdout" >"$ref"
      continue
    fi
    if outputs "$tmp/o" "$tmp/stdout" | cmp -s "$ref" -; then
      echo "  same       $label $v"
    else
      echo "  DIFFERENT  $label $v"
      fail=1
    fi
  done
  rm -f "$ref"
}
# Events/s of old and new alternating, RUNS times each: median and min-max,
# wall and per core (events over user + system seconds).
rate() {  # rate LABEL EVENTS both|new ARGS...
  local label=$1 events=$2 which=$3; shift 3
  local bins=("$new")
  [[ -n $old && $which == both ]] && bins+=("$old")
  for ((r = 0; r < runs; r++)); do
    for b in "${bins[@]}"; do
      /usr/bin/time -o "$tmp/time" -f '%e %U %S' "$b" translate "$@" -o "$tmp/o" -f >/dev/null 2>&1
      echo "$b $(cat "$tmp/time")" >>"$tmp/rates"
    done
  done
  for b in "${bins[@]}"; do
    python3 - "$tmp/rates" "$b" "$events" "$label" "$([[ $b == "$new" ]] && echo new || echo old)" <<'PY'
import statistics, sys
path, binary, events, label, which = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = [l.split() for l in open(path) if l.split()[0] == binary]
wall = [events / max(float(r[1]), 1e-3) / 1e6 for r in rows]
core = [events / max(float(r[2]) + float(r[3]), 1e-3) / 1e6 for r in rows]
print("  %-3s %-30s %6.2f M events/s (%.2f-%.2f), per core %6.2f M events/s (%.2f-%.2f), %d runs" % (
    which, label, statistics.median(wall), min(wall), max(wall), statistics.median(core), min(core), max(core),
    len(rows)))
open(path + ".core", "w").write("%.2f\n" % statistics.median(core))
PY
  done
  rm -f "$tmp/rates"
}

for ids in scrambled in-order; do
  build/bench/bench_latency_trace "$n" "$tmp/$ids" "$ids" | sed 's/^/  /'
  d=$tmp/$ids
  events=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["translated"]["events"])' "$d/out/meta.json")
  # What zstd costs on this output, at its level and faster ones (bytes unchanged).
  [[ -x build/bench/bench_translate_zstd ]] && build/bench/bench_translate_zstd "$d/out" | sed 's/^/  /'
  rm -rf "$d/out"
  same "$ids A,B,C best linear" "$d/A" "$d/B" "$d/C" --reference A
  same "$ids A,B ratio" "$d/A" "$d/B" --reference A --method ratio
  same "$ids B,C hull" "$d/B" "$d/C" --reference C --method hull
  same "$ids A,B,C best piecewise" "$d/A" "$d/B" "$d/C" --reference B --clock-model piecewise
  rate "$ids, 3 nodes, default threads" "$events" both "$d/A" "$d/B" "$d/C" --reference A
  if ((${#threads[@]})); then
    rate "$ids, 3 nodes, --threads 1" "$events" new "$d/A" "$d/B" "$d/C" --reference A --threads 1
  fi
  # Per core at each level against the goal; the bytes differ from the
  # default's, the events not (TranslateCompressionLevel in the tests).
  reached=
  for l in "${levels[@]}"; do
    rate "$ids, --threads 1, level $l" "$events" new "$d/A" "$d/B" "$d/C" --reference A --threads 1 \
      --compression-level="$l" >"$tmp/level.out"
    core=$(cat "$tmp/rates.core")
    bytes=$(stat -c %s "$tmp/o/events.cpt")
    sed 's/, [0-9]* runs$//' "$tmp/level.out" | tr -d '\n'
    python3 -c 'import sys; c, g, b, e = map(float, sys.argv[1:]); print(", %.1f bytes/event, %.2fx the goal of %g M/s per core" % (b / e, c / g, g))' \
      "$core" "$goal" "$bytes" "$events"
    if [[ -z $reached ]] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$core" "$goal"; then
      reached=$l
    fi
  done
  if ((${#levels[@]})); then
    if [[ -n $reached ]]; then
      echo "  $ids: goal $goal M events/s per core reached at --compression-level $reached"
    else
      echo "  $ids: goal $goal M events/s per core NOT reached at any level (zstd's fastest included)"
    fi
  fi
  rm -rf "$d"
done
exit $fail
