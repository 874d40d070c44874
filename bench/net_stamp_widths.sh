#!/usr/bin/env bash
# How tight traffic makes the clock relation, against the MinRTT rounds of the same
# run. Two testbed nodes record the pipeline workload in echo mode (tuples A -> B
# and back over one TCP connection, so data flows both ways) with `record --net
# --netns self --peers` (keyed MinRTT rounds, default rates); then `translate
# --inputs rounds|traffic|both` (default method and clock model) puts B on A's
# clock, and `latency --csv A.out -> B.in` gives each tuple's bound. A is the
# reference, so a bound's width is that of B's clock at the tuple's arrival.
# Prints, per input, the median / p90 / max width, the median's ratio to the
# smallest kernel-stamped MinRTT round trip of the run, and how receives were stamped.
# With two or more binaries, the last one's run also carries a shadow `record --net`
# of the first on each node, so that both stamp the very same packets: then the
# minimum one-way time of the TCP data segments per direction (rx - tx on the shared
# CLOCK_MONOTONIC of the namespaces; their sum is about the narrowest traffic bound)
# with each binary's stamps, and how much earlier the last one stamps each receive.
#
# Usage (root, from the repository): bench/net_stamp_widths.sh [CPTRACE ...]
#   CPTRACE: binaries to compare in one run on the same testbed (default
#   build/cptrace), e.g. a build from before a change against the current one:
#   each records and translates its own recording, one after the other.
#   NET_WIDTH_TUPLES (default 3000) tuples at NET_WIDTH_RATE per second (default 200);
#   NET_WIDTH_TESTBED: testbed.sh options (default none: no added delay).
# Prints figures only.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=$REPO/build
bins=("$@")
[[ ${#bins[@]} -gt 0 ]] || bins=("$B/cptrace")
tuples=${NET_WIDTH_TUPLES:-3000}
rate=${NET_WIDTH_RATE:-200}
prefix=cpw
tmp=$(mktemp -d /tmp/cptrace-widths.XXXXXX)
cleanup() {
  "$REPO/tools/testbed.sh" down --prefix $prefix >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$REPO/tools/testbed.sh" up 2 --prefix $prefix ${NET_WIDTH_TESTBED:-} >/dev/null

# shadow BIN DIR: a --net only recorder of BIN in each node (DIR/shA, DIR/shB).
shadow() {
  local bin=$1 d=$2 k n
  for k in 1 2; do
    n=$([[ $k == 1 ]] && echo A || echo B)
    ip netns exec ${prefix}$k "$bin" record --no-progress --net --netns self -o "$d/sh$n" 2>"$d/sh$n.err" &
    echo $! >>"$d/shadow.pids"
    for _ in $(seq 400); do grep -q attached "$d/sh$n.err" && break; sleep 0.05; done
  done
}

# record BIN DIR: one recording of both nodes into DIR/A and DIR/B.
record() {
  local bin=$1 d=$2
  "$bin" keygen -o "$d/key" >/dev/null
  ip netns exec ${prefix}2 "$bin" record --no-progress --net --netns self --node B --peers 10.77.1.2:7711 \
    --key "$d/key" --sync-wait 20 -o "$d/B" -- "$B/tests/pipeline" --role B --listen 10.77.2.2:9000 --echo \
    >"$d/B.log" 2>&1 &
  local pb=$!
  ip netns exec ${prefix}1 "$bin" record --no-progress --net --netns self --node A --peers 10.77.2.2:7711 \
    --key "$d/key" --sync-wait 20 -o "$d/A" -- "$B/tests/pipeline" --role A --connect 10.77.2.2:9000 --echo \
    --connect-timeout 30 --tuples "$tuples" --rate "$rate" >"$d/A.log" 2>&1 ||
    { echo "  node A failed:"; tail -5 "$d/A.log"; return 1; }
  wait $pb || { echo "  node B failed:"; tail -5 "$d/B.log"; return 1; }
}

i=0
for bin in "${bins[@]}"; do
  i=$((i + 1))
  d=$tmp/run$i
  mkdir -p "$d"
  echo "-- $bin: $tuples tuples at $rate/s, echo mode, 2 nodes${NET_WIDTH_TESTBED:+ ($NET_WIDTH_TESTBED)}"
  [[ ${#bins[@]} -gt 1 && $i == "${#bins[@]}" ]] && shadow "${bins[0]}" "$d"
  record "$bin" "$d" || continue
  if [[ -f $d/shadow.pids ]]; then
    while read -r pid; do kill -INT "$pid"; wait "$pid" || true; done <"$d/shadow.pids"
  fi
  for n in A B; do
    "$bin" info --json "$d/$n" >"$d/$n.info.json"
  done
  for inputs in rounds traffic both; do
    if ! "$bin" translate "$d/A" "$d/B" --reference A --inputs $inputs -o "$d/tr-$inputs" >"$d/tr-$inputs.log" 2>&1; then
      echo "  $inputs: translate refused: $(tail -1 "$d/tr-$inputs.log")"
      continue
    fi
    "$bin" latency "$d/tr-$inputs" --from A.out --to B.in --csv >"$d/lat-$inputs.csv"
    python3 - "$inputs" "$d/lat-$inputs.csv" "$d/A.info.json" "$d/B.info.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[2])))
# The smallest kernel-stamped round trip either node saw: the goal's yardstick.
rtt = min(p["all"]["kernel_min_us"] for f in sys.argv[3:] for p in json.load(open(f)).get("sync", {}).values()
          if p.get("all", {}).get("kernel_ok"))
w = sorted(int(r["ns_hi"]) - int(r["ns_lo"]) for r in rows)
if not w:
    print("  %-8s no tuples" % sys.argv[1]); sys.exit()
q = lambda p: w[min(len(w) - 1, int(p * len(w)))]
print("  %-8s bound width of A.out -> B.in over %d tuples: median %6.2f us  p90 %6.2f us  max %6.2f us"
      "  (median / kernel MinRTT %.2f us: %.2fx)"
      % (sys.argv[1], len(w), q(0.5) / 1e3, q(0.9) / 1e3, w[-1] / 1e3, rtt, q(0.5) / 1e3 / rtt))
PY
  done
  python3 - "$d/A.info.json" "$d/B.info.json" <<'PY'
import json, sys
for f, n in zip(sys.argv[1:], "AB"):
    net = json.load(open(f)).get("net", {})
    st = net.get("stamps", {}).get("rx_stamped_at")
    print("  node %s: %d network events; receives stamped at: %s" % (
        n, net.get("events", 0),
        ", ".join("%s %d" % (k, v) for k, v in st.items()) if st else "netif_receive_skb (no stamp_at field)"))
PY
done

# The same packets stamped by both: the last binary's recording against its shadow.
[[ ${#bins[@]} -gt 1 && -d $d/shA ]] || exit 0
echo "-- the same packets, stamped by ${bins[0]} (shadow) and by $bin, in the last run"
for n in A B; do
  "$bin" dump --csv "$d/$n" >"$d/$n.csv"
  "${bins[0]}" dump --csv "$d/sh$n" >"$d/sh$n.csv"
done
python3 - "$d" <<'PY'
import csv, sys
d = sys.argv[1]
def segs(path):  # TCP data segments: (kind, flow, seq, len) -> first mono_ns
    out = {}
    for r in csv.DictReader(open(path)):
        if r.get("proto") != "tcp" or r["kind"] not in ("tx", "rx") or not r["len"] or int(r["len"]) == 0:
            continue
        k = (r["kind"], r["saddr"], r["sport"], r["daddr"], r["dport"], r["seq"], r["len"])
        t = int(r["mono_ns"])
        out[k] = min(out.get(k, t), t)
    return out
def q(v, p): return v[min(len(v) - 1, int(p * len(v)))]
main = {n: segs("%s/%s.csv" % (d, n)) for n in "AB"}
shad = {n: segs("%s/sh%s.csv" % (d, n)) for n in "AB"}
total = {"shadow": 0, "main": 0}
for src, dst in (("A", "B"), ("B", "A")):
    for name, tr in (("shadow", shad), ("main", main)):
        owd = sorted(t - tr[src][("tx",) + k[1:]] for k, t in tr[dst].items()
                     if k[0] == "rx" and ("tx",) + k[1:] in tr[src])
        if not owd:
            print("  %s -> %s %-6s no matched segments" % (src, dst, name)); continue
        total[name] += owd[0]
        print("  %s -> %s %-6s %5d segments: one-way min %6.2f us  median %6.2f us  p90 %6.2f us" % (
            src, dst, name, len(owd), owd[0] / 1e3, q(owd, 0.5) / 1e3, q(owd, 0.9) / 1e3))
    early = sorted(shad[dst][k] - t for k, t in main[dst].items() if k[0] == "rx" and k in shad[dst])
    if early:
        print("  %s -> %s receive stamped earlier by main than by shadow, %d segments: min %.2f us  median %.2f us  p90 %.2f us  max %.2f us" % (
            src, dst, len(early), early[0] / 1e3, q(early, 0.5) / 1e3, q(early, 0.9) / 1e3, early[-1] / 1e3))
print("  sum of the two minimum one-way times (about the narrowest traffic bound): shadow %.2f us, main %.2f us" % (
    total["shadow"] / 1e3, total["main"] / 1e3))
PY
