#!/usr/bin/env bash
# Why traffic-only clock bounds are wider than the MinRTT rounds' on one machine, and
# by how much, on two namespaces joined by a Linux bridge (no forwarder: the set-up
# where the rounds are tightest). Node A runs the pipeline workload in echo mode
# (tuples to B and back over one TCP connection, paced at RATE per second), both nodes
# record `--net --netns self` with keyed MinRTT rounds at start, stop and 100/s, and
# `translate --inputs rounds|traffic|both` puts B on A's clock. Per rate it prints:
#   - the bound widths of A.out -> B.in per input, and traffic's median over rounds';
#   - bench_traffic_owd: per direction and packet class the minimum one-way delay on
#     the raw kernel stamps and once widened by the stamps' conversion error, beside
#     the probes' one-way delays and minimum RTT (their SO_TIMESTAMPING stamps).
# Then one more run with a third recorder in the host namespace, unfiltered, which
# also stamps the packets at the bridge's ports: the one-way delay of TCP data and
# of the UDP probes split at every stamp point of the path (sender's
# net_dev_start_xmit -> bridge port's netif_rx -> other port's net_dev_start_xmit ->
# receiver's netif_rx).
#
# Usage (root, from the repository): bench/traffic_vs_rounds.sh
#   TVR_RATES (default "300 3000") tuples per second, TVR_SECONDS (default 10) per run.
# Prints figures only.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=$REPO/build
bin=$B/cptrace
p=cptvr
tmp=$(mktemp -d /tmp/cptrace-tvr.XXXXXX)
down() { for n in ${p}1 ${p}2 ${p}br; do ip netns del "$n" 2>/dev/null || true; done; }
cleanup() {
  down
  rm -rf "$tmp"
}
trap cleanup EXIT
down
ip netns add ${p}br
ip -n ${p}br link add br0 type bridge
for k in 1 2; do
  ip netns add ${p}$k
  ip link add eth0 netns ${p}$k type veth peer name port$k netns ${p}br
  ip -n ${p}br link set port$k master br0 up
  ip -n ${p}$k addr add 10.79.0.$k/24 dev eth0
  ip -n ${p}$k link set eth0 up
  ip -n ${p}$k link set lo up
done
ip -n ${p}br link set br0 up

# record DIR TUPLES RATE: both nodes into DIR/A and DIR/B.
record() {
  local d=$1 tuples=$2 rate=$3
  mkdir -p "$d"
  "$bin" keygen -o "$d/key" >/dev/null 2>&1
  ip netns exec ${p}2 "$bin" record --no-progress --net --netns self --node B --peers 10.79.0.1:7711 \
    --key "$d/key" --sync-wait 20 --sync-rate 100 -o "$d/B" -- "$B/tests/pipeline" --role B \
    --listen 10.79.0.2:9000 --echo >"$d/B.log" 2>&1 &
  local pb=$!
  ip netns exec ${p}1 "$bin" record --no-progress --net --netns self --node A --peers 10.79.0.2:7711 \
    --key "$d/key" --sync-wait 20 --sync-rate 100 -o "$d/A" -- "$B/tests/pipeline" --role A \
    --connect 10.79.0.2:9000 --echo --connect-timeout 30 --tuples "$tuples" --rate "$rate" >"$d/A.log" 2>&1 ||
    { echo "  node A failed:"; tail -5 "$d/A.log"; return 1; }
  wait $pb || { echo "  node B failed:"; tail -5 "$d/B.log"; return 1; }
}

widths() {
  local d=$1 inputs
  for inputs in rounds traffic both; do
    if ! "$bin" translate "$d/A" "$d/B" --reference A --inputs $inputs -o "$d/tr-$inputs" >"$d/tr-$inputs.log" 2>&1; then
      echo "  $inputs: translate refused: $(tail -1 "$d/tr-$inputs.log")"
      continue
    fi
    "$bin" latency "$d/tr-$inputs" --from A.out --to B.in --csv >"$d/lat-$inputs.csv" 2>/dev/null
  done
  python3 - "$d" <<'PY'
import csv, os, sys
med = {}
for inputs in ("rounds", "traffic", "both"):
    f = "%s/lat-%s.csv" % (sys.argv[1], inputs)
    if not os.path.exists(f): continue
    w = sorted(int(r["ns_hi"]) - int(r["ns_lo"]) for r in csv.DictReader(open(f)))
    if not w: continue
    q = lambda p: w[min(len(w) - 1, int(p * len(w)))]
    med[inputs] = q(0.5)
    print("  %-8s bound width of A.out -> B.in over %d tuples: min %7.2f us  median %7.2f us  p90 %7.2f us"
          % (inputs, len(w), w[0] / 1e3, q(0.5) / 1e3, q(0.9) / 1e3))
if "rounds" in med and "traffic" in med:
    print("  traffic / rounds median width: %.2f" % (med["traffic"] / med["rounds"]))
PY
  # A skew interval measured while the recorder was preempted is honest but wide,
  # and widens every bound of the run: say so rather than let it pass for a width.
  for n in A B; do
    "$bin" info "$d/$n" | grep "^tsc skew" | sed "s/^/  node $n: /"
  done
}

seconds=${TVR_SECONDS:-10}
for rate in ${TVR_RATES:-300 3000}; do
  d=$tmp/r$rate
  echo "-- $((rate * seconds)) tuples at $rate/s, echo mode, 2 nodes on a bridge"
  record "$d" $((rate * seconds)) "$rate" || continue
  widths "$d"
  "$B/bench/bench_traffic_owd" "$d/A" "$d/B"
done

rates=${TVR_RATES:-300 3000}
rate=${rates%% *}
d=$tmp/hops
echo "-- $((rate * seconds)) tuples at $rate/s, a third recorder (host namespace, unfiltered) stamping every hop"
mkdir -p "$d"
"$bin" record --no-progress --net -o "$d/all" 2>"$d/all.err" &
pa=$!
for _ in $(seq 400); do grep -q attached "$d/all.err" && break; sleep 0.05; done
record "$d" $((rate * seconds)) "$rate" || true
kill -INT $pa
wait $pa || true
"$bin" dump --csv "$d/all" >"$d/all.csv"
python3 - "$d/all.csv" <<'PY'
import collections, csv, sys
# Packet -> {(kind, netns, ifindex): earliest stamp}; TCP data by byte range, UDP by payload.
hops = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    if r["kind"] not in ("tx", "rx") or r["proto"] not in ("tcp", "udp"): continue
    if not (r["saddr"].startswith("10.79.0.") and r["daddr"].startswith("10.79.0.")): continue  # other testbeds
    if r["proto"] == "tcp":
        if r["len"] == "0": continue
        k = ("tcp", r["saddr"], r["sport"], r["seq"], r["len"])
    else:
        k = ("udp", r["saddr"], r["sport"], r["hash"], r["ip_id"], r["len"])
    pt, t = (r["kind"], r["netns"], r["ifindex"]), int(r["mono_ns"])
    if pt not in hops[k] or t < hops[k][pt]: hops[k][pt] = t
paths = collections.defaultdict(list)
for k, h in hops.items():
    if len(h) != 4: continue  # sender tx, port rx, port tx, receiver rx
    ts = sorted(h.values())
    what = "TCP data" if k[0] == "tcp" else "UDP (MinRTT)"
    paths[(what, k[1])].append([(ts[i + 1] - ts[i]) / 1e3 for i in range(3)] + [(ts[3] - ts[0]) / 1e3])
names = ("sender tx -> port rx", "port rx -> port tx", "port tx -> receiver rx", "end to end")
for (what, src), v in sorted(paths.items()):
    if len(v) < 20: continue
    print("  %s from %s, %d packets:" % (what, src, len(v)))
    for i, name in enumerate(names):
        w = sorted(x[i] for x in v)
        q = lambda p: w[min(len(w) - 1, int(p * len(w)))]
        print("    %-24s min %6.2f  p1 %6.2f  p10 %6.2f  median %6.2f us" % (name, w[0], q(0.01), q(0.1), q(0.5)))
PY
