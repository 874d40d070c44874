#!/usr/bin/env bash
# `make demo`: a 3-node pipeline on the namespace testbed. Each node (a network
# namespace) runs one stage of tests/workloads/pipeline (A -> B -> C over TCP)
# under `cptrace record`, which also runs MinRTT rounds with the other two nodes.
# The three traces are translated onto node A's TSC and a per-hop latency table
# with strict bounds is printed.
#
# The namespaces share one physical TSC, so each recorder pretends its clock is
# off by seconds and skewed by tens to hundreds of ppm (--simulate-clock, test
# only): the translation has real work to do. Link 1->2 is 150 us slower than
# the others (asymmetric), every link 100 us + up to 20 us of jitter.
#
# DEMO_KEEP=DIR keeps the three node traces and the translated one in DIR (A, B,
# C, merged) instead of a temporary directory removed at exit; DEMO_PREFIX names
# the testbed's namespaces (default cpdemo), so two runs do not meet.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
if [[ $(id -u) -ne 0 ]]; then
  echo "demo: recording and namespaces need root (sudo make demo)" >&2
  exit 1
fi
prefix=${DEMO_PREFIX:-cpdemo}
if [[ -n ${DEMO_KEEP:-} ]]; then
  out=$DEMO_KEEP
  mkdir "$out"  # a new directory: never records over an existing one
else
  out=$(mktemp -d /tmp/cptrace-demo.XXXXXX)
fi
cleanup() {
  bash tools/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  [[ -n ${DEMO_KEEP:-} ]] || rm -rf "$out"
}
trap cleanup EXIT

$B/cptrace check
echo
echo "== testbed: 3 nodes, 100 us links (+ jitter 20 us), 150 us extra towards node 2"
NETDELAY=$B/netdelay bash tools/testbed.sh up 3 --prefix $prefix --delay 100 --jitter 20 --asym 2:150 >/dev/null

names=(A B C)
sims=("1500000000,40" "-2700000000,-150" "900000000,200")
peers=("10.77.2.2:7711,10.77.3.2:7711" "10.77.1.2:7711,10.77.3.2:7711" "10.77.1.2:7711,10.77.2.2:7711")
roles=("--role A --connect 10.77.2.2:9000 --tuples 5000 --rate 1000 --connect-timeout 30"
       "--role B --listen 10.77.2.2:9000 --connect 10.77.3.2:9000 --connect-timeout 30"
       "--role C --listen 10.77.3.2:9000")
$B/cptrace keygen -o "$out/minrtt.key"   # one key, given to every node (mode 0600)
echo "== recording: 5000 tuples through A -> B -> C, MinRTT rounds between all pairs at start and stop"
pids=()
for k in 2 1 0; do   # C listens first, then B, then A starts sending
  ip netns exec $prefix$((k + 1)) $B/cptrace record --no-progress --node ${names[$k]} --peers "${peers[$k]}" \
    --key "$out/minrtt.key" --sync-rounds 100 --sync-wait 20 --simulate-clock "${sims[$k]}" -o "$out/${names[$k]}" -- \
    $B/tests/pipeline ${roles[$k]} >"$out/${names[$k]}.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do
  if ! wait "$p"; then
    echo "demo: a recorder failed:" >&2
    tail -n 20 "$out"/*.log >&2
    exit 1
  fi
done
for n in "${names[@]}"; do $B/cptrace info "$out/$n" | sed -n 1,2p; done

echo
echo "== translate onto A's TSC (ratio and convex-hull methods, intersected)"
$B/cptrace translate "$out/A" "$out/B" "$out/C" --reference A -o "$out/merged"

for hop in "A.out B.in" "B.in B.out" "B.out C.in" "A.out C.in"; do
  set -- $hop
  echo
  $B/cptrace latency "$out/merged" --from "$1" --to "$2"
done
