#!/usr/bin/env bash
# Load generator figures (called by bench/run.sh; root for the recorded runs).
# Everything on loopback: the generator's own ceiling, not a network's.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
tmp=$(mktemp -d /tmp/cptrace-bench-gen.XXXXXX)
sink_pid=
cleanup() { [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
PORT=${GEN_BENCH_PORT:-17400}
# Slots of 0.1 us for SECS seconds: far more than one thread can send, so it
# emits flat out for a few seconds (3M tuples by default).
SECS=${GEN_BENCH_SECS:-0.3}

start_sink() {  # start_sink ARGS...: a sink for one round on $PORT
  $B/cptrace sink --listen "$PORT" --rounds 1 "$@" >"$tmp/sink.out" 2>"$tmp/sink.err" &
  sink_pid=$!
  for _ in $(seq 100); do grep -q listening "$tmp/sink.err" 2>/dev/null && return; sleep 0.05; done
  echo "sink did not start"; cat "$tmp/sink.err"; exit 1
}
stop_sink() { wait "$sink_pid" || true; sink_pid=; }

# One generator thread asked for far more than it can emit: it falls behind at
# once and emits flat out; its achieved rate is the ceiling.
flat_out() {  # flat_out LABEL [PREFIX...] :: GEN-ARGS...
  local label=$1; shift
  local pre=()
  while [ "$1" != "::" ]; do pre+=("$1"); shift; done; shift
  case " $* " in *" --udp "*) start_sink --udp ;; *) start_sink ;; esac
  "${pre[@]}" $B/cptrace gen --to 127.0.0.1:$PORT --control 127.0.0.1:$((PORT + 1)) --rate 10000000 \
    --duration "$SECS" --json "$@" >"$tmp/gen.json" 2>"$tmp/gen.err" || true
  stop_sink
  python3 - "$label" "$tmp/gen.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[2]))
s = j.get("sink", {})
print("  %-44s %10.0f tuples/s  (%d emitted, sink: %d unique, %d lost)" % (
    sys.argv[1], j["achieved_rate"], j["emitted"], s.get("unique", -1), s.get("lost", -1)))
PY
}

echo "== gen: tuples/s one generator thread emits (64-byte tuples, 10 M/s requested for ${SECS} s, loopback)"
rec=($B/cptrace record --no-progress -f -o "$tmp/trace" --)
flat_out "TCP, one write per tuple, not recorded" ::
flat_out "TCP, one write per tuple, cp_logTS recorded" "${rec[@]}" ::
flat_out "TCP, catch-up batches of 64, not recorded" :: --batch 64
flat_out "TCP, catch-up batches of 64, recorded" "${rec[@]}" :: --batch 64
flat_out "UDP, one datagram per tuple, not recorded" :: --udp
flat_out "UDP, one datagram per tuple, recorded" "${rec[@]}" :: --udp

echo
echo "== maxrate against a sink throttled to 45000 tuples/s (TCP, 2 s rounds, step 10000)"
$B/cptrace sink --listen "$PORT" --throttle 45000 >"$tmp/sink.out" 2>"$tmp/sink.err" &
sink_pid=$!
sleep 0.5
$B/cptrace maxrate --to 127.0.0.1:$PORT --from 10000 --step 10000 --duration 2 --max 100000 || true
kill "$sink_pid"; wait "$sink_pid" || true; sink_pid=

echo
echo "== overhead: CPU that recording costs a workload (1M cp_logTS calls, displacement, own autogroup at nice -20)"
for mode in plain recorded; do
  pre=
  [ $mode = recorded ] && pre="$B/cptrace record --no-progress -f -o $tmp/trace --"
  # The workload's own figures go to /dev/null: stdout carries the JSON report.
  $B/cptrace overhead --nice -20 --json -- \
    sh -c "exec $pre $B/bench/bench_logts --only single --n 1000000 >/dev/null" >"$tmp/ov.json" 2>/dev/null || true
  python3 - $mode "$tmp/ov.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[2]))
print("  %-9s displaced %.3f s +- %.3f (rusage %.3f s), wall %.3f s" % (
    sys.argv[1], j["displaced_cpu_s"], j["uncertainty_s"], j["rusage_user_s"] + j["rusage_sys_s"], j["wall_s"]))
PY
done
