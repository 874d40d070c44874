#!/usr/bin/env bash
# Export of the events and latency tables (called by bench/run.sh): a
# translated three-node run of N tuples (bench/bench_latency_trace.cpp, about
# 4 N events and N latency rows of the pair A.out,C.in), exported by
#   csv.zst   cptrace export table T -o D
#   parquet   cptrace export table T -o D --parquet
#   node      node tools/duckdb/export-parquet.mjs T D (cptrace's CSV through a
#             pipe into DuckDB's Parquet writer: the path before --parquet, the baseline)
#   old.*     the same two by EXPORT_OLD (a previous build's cptrace; default
#             build/cptrace.before when present): old and new in the same run
# first the events table alone, then with the latency table (--pair): the
# latency line is the difference. Each command RUNS times, the forms in turn
# (csv.zst, parquet, old.csv.zst, old.parquet, node, csv.zst, ...) so that a
# machine busy with other work slows them alike; the median wall time with its
# spread, the rows/s (wall, and per CPU-second: user + system) and MB/s (table
# bytes written) at the median, CPU seconds and peak RSS of that run; new/old
# ratios; the goal (5 M rows/s) beside each form's wall rate and CPU ceiling;
# and whether the CSV tables are the same bytes as the old build's.
# Prints figures only. Knobs: EXPORT_TUPLES (default 2000000), EXPORT_RUNS (3),
# EXPORT_OLD (a cptrace binary, or - for none).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
N=${EXPORT_TUPLES:-2000000}
RUNS=${EXPORT_RUNS:-3}
OLD=${EXPORT_OLD:-}
[[ -z $OLD && -x $B/cptrace.before ]] && OLD=$B/cptrace.before
[[ $OLD == - ]] && OLD=
NODE=1
if ! (cd tools/duckdb && node -e "require.resolve('@duckdb/node-api')") >/dev/null 2>&1; then
  echo "  node baseline: skipped, no node or no @duckdb/node-api in tools/duckdb (tools/install-deps.sh)"
  NODE=0
fi
command -v /usr/bin/time >/dev/null || { echo "   skipped: no GNU time (tools/install-deps.sh)"; exit 0; }
tmp=$(mktemp -d -t cptrace-export.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

$B/bench/bench_latency_trace "$N" "$tmp/run" >/dev/null
T=$tmp/run/out
PAIR="--pair A.out,C.in"

# run FORM TABLES: one export into $tmp/o; appends "wall cpu kb bytes" to $tmp/FORM.TABLES.
run() {
  local form=$1 tables=$2 pair="" cmd
  [[ $tables == both ]] && pair=$PAIR
  rm -rf "$tmp/o"
  case $form in
    csv.zst) cmd=("$B/cptrace" export table "$T" -o "$tmp/o" $pair) ;;
    parquet) cmd=("$B/cptrace" export table "$T" -o "$tmp/o" --parquet $pair) ;;
    old.csv.zst) cmd=("$OLD" export table "$T" -o "$tmp/o" $pair) ;;
    old.parquet) cmd=("$OLD" export table "$T" -o "$tmp/o" --parquet $pair) ;;
    node) cmd=(node tools/duckdb/export-parquet.mjs "$T" "$tmp/o" --cptrace "$B/cptrace" $pair) ;;
  esac
  if ! /usr/bin/time -o "$tmp/time" -f '%e %U %S %M' "${cmd[@]}" >/dev/null 2>"$tmp/err"; then
    echo "  $form $tables: FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; return 0
  fi
  read -r wall user sys kb < <(tail -1 "$tmp/time")
  [[ $form == csv.zst && $tables == both ]] && cp "$tmp/err" "$tmp/counts"
  local bytes
  bytes=$(du -cb "$tmp"/o/* | tail -1 | cut -f1)
  echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $kb $bytes" >>"$tmp/$form.$tables"
  # The CSV tables kept once, to compare old and new byte for byte.
  if [[ $form == *csv.zst && $tables == both && ! -d $tmp/keep.$form ]]; then mv "$tmp/o" "$tmp/keep.$form"; fi
}

forms=(csv.zst parquet)
[[ -n $OLD ]] && forms+=(old.csv.zst old.parquet)
((NODE)) && forms+=(node)
for tables in events both; do
  for ((i = 0; i < RUNS; i++)); do
    for form in "${forms[@]}"; do run "$form" "$tables"; done
  done
done

# "cptrace export: E events -> ..., R tuple rows of 1 pair(s) -> ..."
events=$(sed -n 's/^cptrace export: \([0-9]*\) events.*/\1/p' "$tmp/counts" 2>/dev/null || true)
rows=$(sed -n 's/.*, \([0-9]*\) tuple rows.*/\1/p' "$tmp/counts" 2>/dev/null || true)
events=${events:-0} rows=${rows:-0}
echo "  $N tuples: $events events, $rows latency rows (A.out,C.in); $RUNS runs each, other work on the machine"
# The median run of a form (by wall time) and the spread; the latency line is
# both's median minus events' median. On a busy machine the wall times vary
# most; the CPU seconds (user + system) are the steadier figure.
python3 - "$tmp" "$events" "$rows" "${forms[@]}" <<'EOF'
import os
import sys
GOAL = 5.0  # M rows/s (issue 38)
tmp, events, rows, forms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def runs(form, tables):
    try:
        return sorted(tuple(float(x) for x in l.split()) for l in open(f"{tmp}/{form}.{tables}"))
    except FileNotFoundError:
        return []
med, cpus = {}, {}
for form in forms:
    for tables, n in (("events", events), ("both", events + rows)):
        r = runs(form, tables)
        if not r:
            continue
        wall, cpu, kb, size = r[len(r) // 2]
        med[form, tables] = wall
        cpus[form, tables] = sorted(x[1] for x in r)[len(r) // 2]
        label = "events" if tables == "events" else "events+latency"
        print(f"  {form:8} {label:15} {n:10d} rows  {wall:6.2f} s (min {r[0][0]:.2f}, max {r[-1][0]:.2f})"
              f"  {n / wall / 1e6:6.2f} M rows/s  {size / wall / 1e6:7.1f} MB/s  cpu {cpu:6.2f} s"
              f"  {n / cpu / 1e6:6.2f} M rows/cpu-s  {kb / 1024:7.1f} MiB peak  {size / 1e6:8.1f} MB")
    if (form, "both") in med and (form, "events") in med:
        d = med[form, "both"] - med[form, "events"]
        if d > 0:
            print(f"  {form:8} {'latency (diff)':15} {rows:10d} rows  {d:6.2f} s  {rows / d / 1e6:6.2f} M rows/s")
for form in ("csv.zst", "parquet"):
    for tables, label in (("events", "events"), ("both", "events+latency")):
        if (form, tables) in med and ("old." + form, tables) in med:
            print(f"  new / old {form:8} {label:15} wall {med[form, tables] / med['old.' + form, tables]:.2f}x, "
                  f"cpu {cpus[form, tables] / cpus['old.' + form, tables]:.2f}x (medians; below 1: new faster)")
# The goal beside each form's figures: rows/s wall (this run, with the other
# work on the machine), and the ceiling the CPU cost allows on this machine's
# cores when they are free (rows per CPU-second times the cores): the wall
# rate cannot pass it, so a ceiling below the goal says the goal is out of
# reach here whatever the load.
cores = os.cpu_count() or 1
for form in forms:
    if form == "node":
        continue
    for tables, n in (("events", events), ("both", events + rows)):
        if (form, tables) in med:
            label = "events" if tables == "events" else "events+latency"
            wall, ceiling = n / med[form, tables] / 1e6, n / cpus[form, tables] / 1e6 * cores
            print(f"  goal {GOAL:.0f} M rows/s: {form:11} {label:15} wall {wall:5.2f} M rows/s ({wall / GOAL:.2f}x the goal);"
                  f" CPU ceiling on {cores} free cores {ceiling:5.2f} M rows/s ({ceiling / GOAL:.2f}x)")
if ("node", "both") in med:
    for form in ("csv.zst", "parquet"):
        if (form, "both") in med:
            print(f"  node / {form}: {med['node', 'both'] / med[form, 'both']:.1f}x the time, "
                  f"{cpus['node', 'both'] / cpus[form, 'both']:.1f}x the CPU (events+latency, medians)")
EOF
if [[ -d $tmp/keep.csv.zst && -d $tmp/keep.old.csv.zst ]]; then
  if diff -r "$tmp/keep.csv.zst" "$tmp/keep.old.csv.zst" >/dev/null; then
    echo "  CSV tables (events.csv.zst, latency.csv.zst): the same bytes as the old build's"
  else
    echo "  CSV tables: DIFFER from the old build's"
  fi
fi
