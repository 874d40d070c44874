#!/usr/bin/env bash
# Overhead of `cptrace record --net` on a loopback TCP stream inside a fresh network
# namespace, in alternating rounds of one run: (1) no recorder, (2) a recorder whose
# --netns names another namespace (programs run on every packet and filter it out
# in BPF, the drain polls: the fixed cost), (3) a recorder capturing the stream
# (--netns self); then what (3) captured: events/s and drops. Last, what every
# system call of the machine pays while --net records, without and with the
# send- and receive-call arguments kept (--net-send-calls: a sys_enter program): ns per call of dd's
# read()/write() pairs.
# Why (2): on this 2-vCPU VM a polling recorder keeps the vCPUs out of deep idle,
# which by itself speeds up a loopback ping-pong; (2) vs (3) isolates capture cost.
# Prints figures only. Needs root (namespaces, BPF).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
SECS=${NET_BENCH_S:-3}
ROUNDS=${NET_BENCH_ROUNDS:-3}
ns=cpnbench$$x
tmp=$(mktemp -d /tmp/cptrace-netbench.XXXXXX)
cleanup() { ip netns del "$ns" 2>/dev/null || true; ip netns del "${ns}o" 2>/dev/null || true; rm -rf "$tmp"; }

# run_with OUTDIR NETNS-ARG SIZE NODELAY: the stream under a recorder; prints its figure.
run_with() {
  ip netns exec "$ns" $B/cptrace record --net --netns "$2" --no-progress -f -o "$1" 2>"$tmp/err" &
  local rec=$!
  for _ in $(seq 200); do grep -q attached "$tmp/err" && break; sleep 0.05; done
  ip netns exec "$ns" $B/bench/bench_net_stream "$SECS" "$3" "$4"
  kill -INT $rec
  wait $rec || true
}
trap cleanup EXIT
ip netns add "$ns"
ip netns add "${ns}o"
ip -n "$ns" link set lo up

for mode in "65536 0 bulk-64KiB-writes" "200 1 200B-messages-nodelay"; do
  set -- $mode
  echo "-- loopback TCP stream, $3, ${SECS} s per run"
  for r in $(seq "$ROUNDS"); do
    base=$(ip netns exec "$ns" $B/bench/bench_net_stream "$SECS" "$1" "$2")
    idle=$(run_with "$tmp/o" "/run/netns/${ns}o" "$1" "$2")
    with=$(run_with "$tmp/r" self "$1" "$2")
    $B/cptrace info --json "$tmp/r" >"$tmp/info.json"
    python3 - "$base" "$idle" "$with" "$tmp/info.json" <<'PY'
import json, sys
b, i, w = (float(a.split()[0]) for a in sys.argv[1:4])
secs = float(sys.argv[3].split()[4])
n = json.load(open(sys.argv[4]))["net"]
print("  none %7.1f MB/s | filtered-out %7.1f MB/s | capturing %7.1f MB/s (%+.1f %% vs filtered-out) | "
      "%d events = %.0f events/s, %d dropped, %s" % (
    b, i, w, (w - i) / i * 100, n["events"], n["events"] / secs, n["dropped"],
    "recorded+dropped==seen" if n["accounted"] else "NOT ACCOUNTED"))
PY
  done
done

# dd_ns: ns per system call of `dd bs=1` (a read() and a write() per byte).
dd_ns() {
  local n=${NET_BENCH_DD:-1000000} t0 t1
  t0=$(date +%s%N)
  dd if=/dev/zero of=/dev/null bs=1 count="$n" 2>/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / (2 * n)))
}
echo "-- system calls while --net records (dd bs=1), without and with --net-send-calls (every read() and write() kept)"
# dd_under ARGS...: dd_ns while `record ARGS` runs.
dd_under() {
  $B/cptrace record "$@" --no-progress -f -o "$tmp/s" 2>"$tmp/err" &
  local rec=$!
  for _ in $(seq 200); do grep -q attached "$tmp/err" && break; sleep 0.05; done
  dd_ns
  kill -INT $rec
  wait $rec || true
}
for r in $(seq "$ROUNDS"); do
  base=$(dd_ns)
  net=$(dd_under --net)
  calls=$(dd_under --net --net-send-calls)
  echo "  none $base ns per call | --net $net ns | --net --net-send-calls $calls ns ($((calls - net)) ns more than --net)"
done
