#!/usr/bin/env bash
# Analysis at scale (called by bench/run.sh; root, for the recorder): for each
# tuple count, bench_tuples logs every tuple on src.out, mid.in and sink.in
# with scrambled ids (bench/bench_tuples.c), cptrace records and translates it,
# and latency, report and export table run on the result under GNU time: one
# line per command with seconds, tuples/s, peak RSS and the --memory budget.
# Prints figures only; a command that fails or is killed prints so and the
# run goes on. Knobs (environment):
#   ANALYSIS_TUPLES       tuple counts (default "5000000 20000000 100000000")
#   ANALYSIS_MEMORY       --memory budget of the analysis commands (default 1G)
#   ANALYSIS_RATE         emitter pace in tuples/s, 0 = flat out (default 1000000)
#   ANALYSIS_RECORD_ONLY  1: record and translate only, no analysis commands
#   ANALYSIS_DUCKDB       0: no DuckDB comparison (default 1: when node and
#                         tools/duckdb's @duckdb/node-api are installed, the
#                         trace is exported to Parquet and DuckDB answers
#                         latency's question on it; the ratio is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
TUPLES=${ANALYSIS_TUPLES:-5000000 20000000 100000000}
MEMORY=${ANALYSIS_MEMORY:-1G}
# Paced: flat out (~11 M events/s under the recorder, on a 2-CPU VM shared
# with builds) the recorder dropped 9-29 % of 300 M events, 12 % of 15 M once;
# at 2 M and 1 M tuples/s (6 M, 3 M events/s) nothing. The slower one leaves
# room for a busier machine, and 100 s of recording is little next to the
# analysis.
RATE=${ANALYSIS_RATE:-1000000}
RECORD_ONLY=${ANALYSIS_RECORD_ONLY:-0}
DUCKDB=${ANALYSIS_DUCKDB:-1}
if [[ $DUCKDB == 1 ]] && ! (cd tools/duckdb && node -e "require.resolve('@duckdb/node-api')") >/dev/null 2>&1; then
  echo "  DuckDB comparison: skipped, no node or no @duckdb/node-api in tools/duckdb (tools/install-deps.sh)"
  DUCKDB=0
fi
# -t: under $TMPDIR when set, so a larger disk can be chosen for 100 M tuples.
tmp=$(mktemp -d -t cptrace-analysis.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Spill files of the analysis commands land in $tmp too: removed with it,
# whatever happens to a command.
export TMPDIR=$tmp
NODE=bench

# Without a budget the analysis keeps every tuple in memory: measured before
# the budget existed, latency and report peaked at ~300 bytes per tuple and
# export table at ~420 (5 M tuples: 1.4 and 2.0 GiB). A command that would
# need more than the machine has is skipped rather than OOM-killed.
UNBOUNDED_BYTES_PER_TUPLE=450
# export table writes every event (~16-25 bytes of zstd CSV each) and a latency
# row per tuple (~20 bytes), and spills ~170 bytes per tuple beyond --memory:
# checked against the free disk before it runs, with a fifth more for whatever
# else fills the disk meanwhile.
EXPORT_BYTES_PER_TUPLE=$(((3 * 25 + 20 + 170) * 6 / 5))

command -v /usr/bin/time >/dev/null || { echo "   skipped: no GNU time (tools/install-deps.sh)"; exit 0; }

bytes() {  # bytes SIZE: 1G, 256M, 512K or plain bytes (powers of 1024)
  local n=${1%[KkMmGgTt]}
  case ${1: -1} in
    K|k) echo $((n << 10)) ;; M|m) echo $((n << 20)) ;;
    G|g) echo $((n << 30)) ;; T|t) echo $((n << 40)) ;; *) echo "$n" ;;
  esac
}
mem_available() { echo $(($(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024)); }
disk_free() { df -B1 --output=avail "$tmp" | tail -1; }

# --memory per command: the budget is passed to each command whose help lists
# it, so a partly converted build is measured as far as it goes.
declare -A budget_args
# (export's options are its formats': table's help is the one that lists it.)
for c in latency report "export"; do
  # shellcheck disable=SC2086
  if $B/cptrace ${c/export/export table} --help 2>/dev/null | grep -q -- '--memory'; then
    budget_args[$c]="--memory $MEMORY"
  else
    budget_args[$c]=""
  fi
done

# measure N LABEL OUT CMD...: run cptrace CMD under GNU time, its stdout to
# OUT; print one figure line.
measure() {
  local n=$1 label=$2 out=$3; shift 3
  local budget=${budget_args[$1]} rc=0 kb secs
  # Unquoted on purpose: "--memory SIZE" is two words, or none.
  # shellcheck disable=SC2086
  /usr/bin/time -o "$tmp/time" -f '%M %e %U %S' $B/cptrace "$@" $budget >"$out" 2>"$tmp/err" || rc=$?
  # GNU time writes a line of its own first when the command failed or was killed.
  local usr sys
  read -r kb secs usr sys < <(tail -1 "$tmp/time")
  if ((rc != 0)); then
    echo "  $label: FAILED (exit $rc):"
    tail -3 "$tmp/err" | sed 's/^/    /'
    return 0
  fi
  last_secs=$secs
  last_cpu=$(awk -v u="$usr" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  local verdict="budget: none (no --memory in this build)"
  if [[ -n $budget ]]; then
    if ((kb * 1024 <= $(bytes "$MEMORY"))); then
      verdict="budget $MEMORY: within budget"
    else
      verdict="budget $MEMORY: OVER budget"
    fi
  fi
  awk -v l="$label" -v n="$n" -v s="$secs" -v kb="$kb" -v v="$verdict" 'BEGIN {
    printf "  %-22s %11d tuples %9.2f s %12.0f tuples/s %9.1f MiB peak RSS  %s\n",
      l, n, s, n / (s > 0 ? s : 0.01), kb / 1024, v }'
  echo "    CPU: $last_cpu s (user $usr, sys $sys)"
  return 0
}

# duckdb_latency N DIR LATENCY_SECS: the trace exported to Parquet
# (tools/duckdb/export-parquet.mjs, timed), then DuckDB on events.parquet with
# the question `latency` answers: the first src.out and sink.in event of each
# tuple joined on the id, duration and strict bound per tuple (the reference's
# ticks), count, p50, p99 and the p99's bound. Both use every CPU (DuckDB's
# default threads, cptrace's default --threads). Prints DuckDB's line and
# latency's time as a ratio of it (the goal: at most 1/3).
duckdb_latency() {
  local n=$1 dir=$2 lat=$3 lat_cpu=$4 kb secs
  if ! /usr/bin/time -o "$tmp/time" -f '%M %e' node tools/duckdb/export-parquet.mjs "$dir/tr" "$dir/pq" \
    --cptrace "$B/cptrace" >"$tmp/out" 2>"$tmp/err"; then
    echo "  export-parquet: FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; rm -rf "$dir/pq"; return 0
  fi
  read -r kb secs < <(tail -1 "$tmp/time")
  awk -v n="$((3 * n))" -v s="$secs" -v kb="$kb" 'BEGIN {
    printf "  %-22s %11d events %9.2f s %12.0f events/s %9.1f MiB peak RSS\n", "export-parquet.mjs", n, s, n / (s > 0 ? s : 0.01), kb / 1024 }'
  local sql="WITH a AS (SELECT tuple, arg_min(ref_ts, ref_ts) ts, arg_min(ref_lo, ref_ts) lo, arg_min(ref_hi, ref_ts) hi
      FROM events WHERE channel = 'src.out' AND kind = 'user' GROUP BY tuple),
    b AS (SELECT tuple, arg_min(ref_ts, ref_ts) ts, arg_min(ref_lo, ref_ts) lo, arg_min(ref_hi, ref_ts) hi
      FROM events WHERE channel = 'sink.in' AND kind = 'user' GROUP BY tuple),
    d AS (SELECT b.ts - a.ts AS v, b.lo - a.hi AS lo, b.hi - a.lo AS hi FROM a JOIN b USING (tuple))
    SELECT count(*) AS n, quantile_disc(v, 0.5::DOUBLE) AS p50, quantile_disc(v, 0.99::DOUBLE) AS p99,
      quantile_disc(lo, 0.99::DOUBLE) AS p99_lo, quantile_disc(hi, 0.99::DOUBLE) AS p99_hi FROM d"
  if ! /usr/bin/time -o "$tmp/time" -f '%M %e %U %S' node tools/duckdb/query.mjs "$dir/pq" "$sql" >"$tmp/out" 2>"$tmp/err"; then
    echo "  DuckDB query: FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; rm -rf "$dir/pq"; return 0
  fi
  local usr sys
  read -r kb secs usr sys < <(tail -1 "$tmp/time")
  awk -v l="DuckDB (same question)" -v n="$n" -v s="$secs" -v kb="$kb" -v lat="$lat" 'BEGIN {
    printf "  %-22s %11d tuples %9.2f s %12.0f tuples/s %9.1f MiB peak RSS  (node start-up included)\n",
      l, n, s, n / (s > 0 ? s : 0.01), kb / 1024
    printf "    latency / DuckDB: %.2f (%.1fx %s; goal: latency at most 1/3 of DuckDB)\n", lat / (s > 0 ? s : 0.01),
      (lat <= s ? s / (lat > 0 ? lat : 0.01) : lat / (s > 0 ? s : 0.01)), (lat <= s ? "faster" : "slower") }'
  # CPU time too: on a machine shared with other work, wall time says less.
  awk -v u="$usr" -v s="$sys" -v lat="$lat_cpu" 'BEGIN { c = u + s
    printf "    DuckDB CPU: %.2f s (user %.2f, sys %.2f); latency / DuckDB in CPU time: %.2f\n", c, u, s, lat / (c > 0 ? c : 0.01) }'
  tr -d ' \n' <"$tmp/out" | sed 's/^/    DuckDB: /; s/$/\n/'
  rm -rf "$dir/pq"
}

for n in $TUPLES; do
  echo "-- $n tuples ($((3 * n)) events), scrambled ids, 3 channels"
  # Which analysis commands this machine can run at this size.
  runnable=()
  if [[ $RECORD_ONLY == 1 ]]; then
    echo "  record and translate only (ANALYSIS_RECORD_ONLY=1)"
  else
    for c in latency report "export"; do
      need=$((n * UNBOUNDED_BYTES_PER_TUPLE))
      if [[ -z ${budget_args[$c]} ]] && ((need > $(mem_available))); then
        echo "  ${c/export/export table}: skipped, no --memory in this build and holding $n tuples in memory needs" \
          "~$((need >> 30)) GiB, $(($(mem_available) >> 30)) GiB available"
      else
        runnable+=("$c")
      fi
    done
    if ((${#runnable[@]} == 0)); then
      echo "  nothing to run at this size: not recorded"
      continue
    fi
  fi

  dir=$tmp/trace
  /usr/bin/time -o "$tmp/time" -f '%M %e' $B/cptrace record --no-progress --node $NODE -o "$dir/raw" -- \
    $B/bench/bench_tuples --n "$n" --rate "$RATE" >"$tmp/out" 2>"$tmp/err" ||
    { echo "  record FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; rm -rf "$dir"; continue; }
  read -r kb secs < "$tmp/time"
  $B/cptrace info --json "$dir/raw" >"$tmp/info.json"
  python3 - "$tmp/info.json" "$kb" "$secs" "$tmp/counts" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); kb, secs = int(sys.argv[2]), float(sys.argv[3])
open(sys.argv[4], "w").write("%d %d\n" % (j["events"], j["dropped"]))
print("  record                 %d events in %.2f s = %.2f M events/s, %d dropped, trace %.1f MB, recorder %.1f MiB peak RSS" % (
    j["events"], secs, j["events"] / secs / 1e6, j["dropped"], j["file_bytes"] / 1e6, kb / 1024))
PY
  read -r events dropped <"$tmp/counts"
  sed 's/^/    emitter: /' "$tmp/out"
  if ((dropped > 0)); then
    echo "    WARNING: $dropped events dropped: the figures below are for a trace missing" \
      "them (slower ANALYSIS_RATE)"
  fi

  /usr/bin/time -o "$tmp/time" -f '%M %e' $B/cptrace translate "$dir/raw" --reference $NODE -o "$dir/tr" \
    >"$tmp/out" 2>"$tmp/err" ||
    { echo "  translate FAILED:"; tail -3 "$tmp/err" | sed 's/^/    /'; rm -rf "$dir"; continue; }
  read -r kb secs < "$tmp/time"
  size=$(stat -c %s "$dir/tr/events.cpt")
  awk -v e="$events" -v s="$secs" -v b="$size" -v kb="$kb" 'BEGIN {
    printf "  translate              %d events in %.2f s = %.2f M events/s, translated trace %.1f MB, %.1f MiB peak RSS\n",
      e, s, e / (s > 0 ? s : 0.01) / 1e6, b / 1e6, kb / 1024 }'

  for c in "${runnable[@]}"; do
    case $c in
      latency)
        measure "$n" "latency (summary)" "$tmp/out" latency "$dir/tr" --from src.out --to sink.in
        # Every tuple has both ends: the summary's count is the whole run.
        head -1 "$tmp/out" | sed 's/^/    /'
        grep '^unmatched' "$tmp/out" | sed 's/^/    /' || true
        latency_secs=$last_secs latency_cpu=$last_cpu
        # The goal is per core: latency uses every CPU (--threads' default).
        # Per CPU-second as well, which other work on the machine moves less.
        awk -v n="$n" -v s="$latency_secs" -v cpu="$latency_cpu" -v c="$(nproc)" 'BEGIN {
          printf "    per core: %.2f M tuples/s on %d threads by wall time, %.2f M tuples per CPU-second (goal: at least 5)\n",
            n / (s > 0 ? s : 0.01) / c / 1e6, c, n / (cpu > 0 ? cpu : 0.01) / 1e6 }'
        measure "$n" "latency --csv" /dev/null latency "$dir/tr" --from src.out --to sink.in --csv
        [[ $DUCKDB == 1 ]] && duckdb_latency "$n" "$dir" "$latency_secs" "$latency_cpu"
        ;;
      report)
        measure "$n" "report" /dev/null report "$dir/tr" --pair src.out,sink.in -o "$dir/report.html"
        rm -f "$dir/report.html"
        ;;
      export)
        need=$((n * EXPORT_BYTES_PER_TUPLE))
        if ((need > $(disk_free))); then
          echo "  export table: skipped, its CSV needs ~$((need >> 30)) GiB of disk," \
            "$(($(disk_free) >> 30)) GiB free (set TMPDIR to a larger disk)"
          continue
        fi
        measure "$n" "export table" /dev/null "export" table "$dir/tr" -o "$dir/table" --pair src.out,sink.in
        if [[ -f $dir/table/latency.csv.zst ]]; then
          echo "    latency.csv.zst: $(($(zstd -dc "$dir/table/latency.csv.zst" | wc -l) - 1)) tuple rows"
          trace=$(stat -c %s "$dir/tr/events.cpt")
          for f in "$dir"/table/*.csv.zst; do
            size=$(stat -c %s "$f")
            echo "    $(basename "$f"): $((size >> 20)) MiB, $(awk -v a="$size" -v b="$trace" 'BEGIN { printf "%.1f", a / b }')x" \
              "the translated trace's events.cpt ($((trace >> 20)) MiB)"
          done
        fi
        rm -rf "$dir/table"
        ;;
    esac
  done
  # The next size needs the disk: the trace goes now, not at exit.
  rm -rf "$dir"
done
