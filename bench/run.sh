#!/usr/bin/env bash
# `make bench`: figures for the record path, all measured in this run.
# Prints numbers only; nothing here passes or fails on a time.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build

# Runs CMD... as root; elsewhere says the section is skipped, and WHY.
as_root() {
  local why=$1
  shift
  if [[ $(id -u) -eq 0 ]]; then "$@"; else echo "   skipped: $why"; fi
}
tmp=$(mktemp -d /tmp/cptrace-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
N=${BENCH_EVENTS:-5000000}

echo "== 1. uprobe floor: empty nop5 uprobe vs cp_logTS recording program (same process)"
$B/bench/bench_uprobe 50000

echo
echo "== 2. nothing attached (no-call baseline, bare nop5 vs stamped site, cp_logTS, batch)"
$B/bench/bench_logts --n 50000000

echo
echo "== 2b. opening and closing a channel, by the names the process's registry holds (nothing attached)"
$B/bench/bench_channel_open --n 20000

echo
echo "== 3. recorded by cptrace record (single path, $N events)"
$B/cptrace record --no-progress -o "$tmp/single" -- $B/bench/bench_logts --only single --n "$N" 2>"$tmp/err" || cat "$tmp/err"
grep -E "recorded|dropped" "$tmp/err" || true
$B/cptrace info "$tmp/single" | sed -n 2,4p

echo
echo "== 3b. single events buffered (cp_logTS's default) and at the site (CPTRACE_SINGLE=site):"
echo "   recorded, $N events each, no per-event probe hit; ratio to the batch path in this run"
ns_of() { sed -n 's/.*ns\/event=\([0-9.]*\).*/\1/p' "$1" | head -1; }
for mode in buffer site; do
  CPTRACE_SINGLE=$mode $B/cptrace record --no-progress -o "$tmp/s-$mode" -- \
    $B/bench/bench_logts --only single --n "$N" >"$tmp/s-$mode.out" 2>"$tmp/err" || cat "$tmp/err"
  echo "   cp_logTS ($mode): $(ns_of "$tmp/s-$mode.out") ns/event; $(grep -oE '[0-9]+ events recorded, [0-9]+ dropped' "$tmp/err")"
done
$B/cptrace record --no-progress -o "$tmp/s-batch" -- $B/bench/bench_logts --only batch --n "$N" \
  >"$tmp/s-batch.out" 2>"$tmp/err" || cat "$tmp/err"
echo "   cp_logTS_batch:    $(ns_of "$tmp/s-batch.out") ns/event; $(grep -oE '[0-9]+ events recorded, [0-9]+ dropped' "$tmp/err")"
awk -v s="$(ns_of "$tmp/s-buffer.out")" -v b="$(ns_of "$tmp/s-batch.out")" \
  'BEGIN { printf "   buffered single / batch = %.2f (goal: at most 2)\n", s / b }'

echo
echo "== 4. recorded by cptrace record (batch path, $((N * 20)) events)"
$B/cptrace record --no-progress -o "$tmp/batch" -- $B/bench/bench_logts --only batch --n $((N * 20)) 2>"$tmp/err" || cat "$tmp/err"
grep -E "recorded|dropped" "$tmp/err" || true
$B/cptrace info "$tmp/batch" | sed -n 2,4p

echo
echo "== 5. sustained: batch path flat out for ${SUSTAIN_S:-30} s under the recorder"
$B/cptrace record --no-progress --duration "${SUSTAIN_S:-30}" -o "$tmp/sustain" -- \
  $B/bench/bench_logts --only batch --n 100000000000 2>"$tmp/err" >/dev/null || true
$B/cptrace info --json "$tmp/sustain" | python3 -c '
import json,sys; j=json.load(sys.stdin)
print("  %d events in %.2f s = %.1f M events/s, %d dropped, file %.1f MB, %.1fx compression" % (
  j["events"], j["span_s"], j["events"]/max(j["span_s"],1e-9)/1e6, j["dropped"],
  j["file_bytes"]/1e6, j["compression_ratio"]))'

echo
echo "== 5b. zero drops: paced emitter (chunks of 1000, busy wait), ${ZERO_DROP_STEP_S:-10} s per step, default record"
echo "   options; the recorder's CPU is its rusage less the emitter's own (uprobe programs included)"
echo "-- batch path: 10/20/30/40 M/s, five runs in a row; drops per step and run, the collector's stall counters,"
echo "   the emitter's achieved rate and the share of its chunks logged behind schedule (at its full speed), and the"
echo "   CPU budget: recorder and emitter CPU s per M events, and the CPUs both take at each target against this machine's"
python3 bench/zero_drop.py --build $B --path batch --rates 10e6,20e6,30e6,40e6 --runs 5
echo "-- single path: rising rate until the first drop"
python3 bench/zero_drop.py --build $B --path single

echo
echo "== 5c. sizing: recorder CPU per event against --wakeup-kib and --block-events, batch path at 20 M/s"
echo "   (the defaults, a quarter of the ring and 16384, were chosen from this sweep: docs/record.md)"
python3 bench/size_sweep.py --build $B --path batch --step-s 5 --repeat 2 --wakeup-kib 64,256,1024,4096 \
  --block-events 4096,16384,65536 | sed -n '/^summary/,$p'

echo
echo "== 6. codec: plain zstd vs version 1 (delta/varint) vs Events2 (groups), then zstd"
$B/bench/bench_codec
echo "-- the same on section 4's batch recording"
$B/bench/bench_codec "$tmp/batch/events.cpt"

echo
echo "== 7. Java (JNI): ns per event from Java, baseline loop in the same JVM run"
echo "   (paper, for comparison: buffered JNI handler 152-173 ns/event; Kieker ~4.6 us/event)"
if [[ -f $B/bench/java/.built ]]; then
  JN=${BENCH_JAVA_EVENTS:-2000000}
  JCMD=(java -cp "$B/cptrace.jar:$B/bench/java" JniBench --reps 5)
  echo "-- not attached ($((JN * 5)) events per loop)"
  "${JCMD[@]}" --n $((JN * 5))
  for mode in single batch; do
    echo "-- attached: cptrace record --lib $B/libcptrace_jni.so, $mode path ($JN events per timed loop)"
    $B/cptrace record --no-progress --ring-mb 64 --lib "$B/libcptrace_jni.so" -o "$tmp/java-$mode" -- \
      "${JCMD[@]}" --only "$mode" --n "$JN" 2>"$tmp/err" || cat "$tmp/err"
    grep -E "recorded|dropped" "$tmp/err" || true
  done
else
  echo "   skipped: Java parts not built (no JDK; run tools/install-deps.sh)"
fi

echo
echo "== 8. channel handlers: per-event cost with each handler attached (null = floor of the uprobe path)"
$B/bench/bench_handlers "${HANDLER_EVENTS:-200000}"
echo
echo "== 9. MinRTT: kernel vs user-space minimum RTT, rounds/s, rounds until the minimum settles"
$B/bench/bench_minrtt --runs 5 --rounds 1000 --gap-ms 0.2 | tail -1
$B/bench/bench_minrtt --runs 3 --rounds 1000 --gap-ms 0.2 --bridge | tail -1

echo
echo "== 10. network capture: loopback TCP stream with and without record --net"
bash bench/net_capture.sh
echo "-- netlat: one-way delays of a recorded TCP stream between two testbed nodes, per matched packet"
bash bench/netlat_scale.sh

echo
echo "== 11. load generator: flat-out emission, maxrate vs a throttled sink, recording cost by displacement"
bash bench/gen.sh

echo
echo "== 12. namespace testbed: one-way time beyond the configured delay, per delay (stacks + forwarder)"
$B/bench/bench_testbed "${TESTBED_PROBES:-300}"

echo
echo "== 13. cptrace overhead: displaced CPU vs the command's rusage (busy, and mostly idle)"
if [[ $(id -u) -eq 0 ]]; then
  cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
  for cmd in "$B/tests/burn 400" "sh -c 'for i in 1 2 3 4 5; do $B/tests/burn 40; sleep 0.1; done'"; do
    eval "$B/cptrace overhead --json --nice -20 --cpus $cpu -- $cmd" 2>/dev/null | python3 -c '
import json,sys; j=json.load(sys.stdin); ru=j["rusage_user_s"]+j["rusage_sys_s"]
others=j["wall_s"]*len(j["cpus"])-j["spinner_cpu_s"]-ru
print("  displaced %.4f s +- %.4f, rusage %.4f s, ratio %.3f; others on the CPU %.4f s, rate spread %.1f%%, wall %.3f s" % (
  j["displaced_cpu_s"], j["uncertainty_s"], ru, j["displaced_cpu_s"]/ru, others, 100*j["rate_spread"][0], j["wall_s"]))'
  done
else
  echo "   skipped: --nice -20 needs root"
fi

echo
echo "== 14. clock-relation hulls: constraint points per second (incremental monotone chain) and the fit"
$B/bench/bench_hull "${BENCH_HULL_POINTS:-50000000}"

echo
echo "== clock: CLOCK_MONOTONIC -> TSC conversion bounds on simulated clocks (quanta, steps, rate change, slews)"
$B/bench/bench_clock_bounds "${BENCH_CLOCK_STAMPS:-1000000}"

echo
echo "== 15. clock relations across a rate change (+50 then -30 ppm), ${DRIFT_S:-300} s on the testbed:"
echo "   widest bound of B's events per tenth of the run, rounds at start/stop only vs traffic vs both"
if [[ $(id -u) -eq 0 ]]; then
  (cd $B && CPTRACE_DRIFT_SECONDS=${DRIFT_S:-300} ./cptrace_tests --gtest_filter='TranslateDriftE2E.*' |
     grep -E "drift e2e|OK|FAILED")
else
  echo "   skipped: the testbed needs root"
fi

echo
echo "== 16. traffic against rounds: bound widths of translate --inputs rounds|traffic|both on the testbed"
as_root "the testbed needs root" bash bench/net_stamp_widths.sh

echo
echo "== 16b. traffic against rounds on a bridge (no forwarder): widths, minimum one-way delays per"
echo "   packet class and conversion error, and the one-way delay split at every stamp point of the path"
as_root "namespaces need root" bash bench/traffic_vs_rounds.sh

echo
echo "== 17. strict bounds under NTP-style clock adjustments (freq +-500 ppm, PLL slew, tick +-2 %,"
echo "   REALTIME step), ${SLEW_S:-30} s per recording on the testbed: contained N of N, widths"
bash bench/slew_truth.sh

echo
echo "== 18. analysis at scale: latency, report, export table on ${ANALYSIS_TUPLES:-5000000 20000000 100000000} tuples"
echo "   (3 channels, scrambled ids, batch path): seconds, tuples/s, peak RSS against --memory ${ANALYSIS_MEMORY:-1G}"
as_root "recording needs root" bash bench/analysis_scale.sh

echo
echo "== 18b. report with one path of three hops against one latency: ${REPORT_RATIO_TUPLES:-2000000} tuples,"
echo "   generated translated 3-node run, alternating, medians (goal: report at most 1.5x latency); against"
echo "   REPORT_OLD (a previous build's cptrace; default $B/cptrace.before when present) in the same run"
old=${REPORT_OLD:-}
[[ -z $old && -x $B/cptrace.before ]] && old=$B/cptrace.before
REPORT_RATIO_OLD=$old bash bench/report_path_ratio.sh
if [[ -n $old ]]; then
  echo "   report pages, stderr and exit codes byte for byte against $old (translated --path/--pair,"
  echo "   one node, spilled with --memory 16M):"
  bash bench/report_compare.sh "$old" $B/cptrace || echo "   OUTPUTS DIFFER (above)"
fi

echo
echo "== 19. top RUN: one refresh of the live cross-node view, 3 nodes x ${RUN_VIEW_EVENTS:-1000000} events,"
echo "   2 channel pairs (relations rebuilt from the rounds, every tuple's bound, percentiles; then a refresh"
echo "   after a new round on every pair, bounding again only the tuples whose relations changed)"
$B/bench/bench_run_view "${RUN_VIEW_EVENTS:-1000000}" 5

echo
echo "== 20. translate of a cluster run: ${CLUSTER_NODES:-64} synthetic nodes, rounds in the O(N) topology of"
echo "   cluster record (each node with the reference and its neighbour), 8-node pipeline chains"
for tuples in ${CLUSTER_TUPLES:-2000 20000}; do
  $B/bench/bench_translate_cluster "${CLUSTER_NODES:-64}" "$tuples"
done

echo
echo "== 21. export table: events and latency tables of ${EXPORT_TUPLES:-2000000} tuples as .csv.zst and Parquet"
echo "   (cptrace's own writer), rows/s (wall and per CPU-second) and MB/s; against EXPORT_OLD (a previous"
echo "   build's cptrace; default $B/cptrace.before when present) in this run, and export-parquet.mjs (CSV piped"
echo "   into DuckDB); the CSV tables compared byte for byte with the old build's; the goal (5 M rows/s) beside"
echo "   each form's wall rate and its CPU ceiling (rows per CPU-second times the cores)"
bash bench/export_tables.sh

echo
echo "== 21b. record -- a command that does nothing: wall time to start (until it runs) and to stop"
as_root "recording needs root" bash bench/record_startup.sh $B/cptrace 5

echo
echo "== 22. translate throughput: 3 nodes, ~$((4 * ${TRANSLATE_TUPLES:-2500000})) events, scrambled and in-order ids;"
echo "   events/s (wall, and per core from user+system time), median of 3 (min-max), this build's default"
echo "   threads and --threads 1, against TRANSLATE_OLD (a previous build's cptrace; default $B/cptrace.before"
echo "   when present) alternating in this run, every output compared byte for byte (goal: 10 M events/s per core);"
echo "   and the CPU per event of compressing the output at zstd level 1 (written) and faster levels; then"
echo "   per core (--threads 1) at --compression-level 1 (the default), -5 and zstd's fastest, against the goal"
old=${TRANSLATE_OLD:-}
[[ -z $old && -x $B/cptrace.before ]] && old=$B/cptrace.before
bash bench/translate_compare.sh "${old:--}" $B/cptrace "${TRANSLATE_TUPLES:-2500000}" 3 || echo "   OUTPUTS DIFFER (above)"
