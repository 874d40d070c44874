#!/usr/bin/env bash
# How tight traffic makes the clock relation, against the MinRTT rounds of the same
# run. Two testbed nodes record the pipeline workload in echo mode (tuples A -> B
# and back over one TCP connection, so data flows both ways) with `record --net
# --netns self --peers` (keyed MinRTT rounds, default rates); then `translate
# --inputs rounds|traffic|both` (default method and clock model) puts B on A's
# clock, and `latency --csv A.out -> B.in` gives each tuple's bound. A is the
# reference, so a bound's width is that of B's clock at the tuple's arrival.
# Prints, per input, the median / p90 / max width and how receives were stamped.
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
  record "$bin" "$d" || continue
  for n in A B; do
    "$bin" info --json "$d/$n" >"$d/$n.info.json"
  done
  for inputs in rounds traffic both; do
    if ! "$bin" translate "$d/A" "$d/B" --reference A --inputs $inputs -o "$d/tr-$inputs" >"$d/tr-$inputs.log" 2>&1; then
      echo "  $inputs: translate refused: $(tail -1 "$d/tr-$inputs.log")"
      continue
    fi
    "$bin" latency "$d/tr-$inputs" --from A.out --to B.in --csv >"$d/lat-$inputs.csv"
    python3 - "$inputs" "$d/lat-$inputs.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[2])))
w = sorted(int(r["ns_hi"]) - int(r["ns_lo"]) for r in rows)
if not w:
    print("  %-8s no tuples" % sys.argv[1]); sys.exit()
q = lambda p: w[min(len(w) - 1, int(p * len(w)))]
print("  %-8s bound width of A.out -> B.in over %d tuples: median %6.2f us  p90 %6.2f us  max %6.2f us"
      % (sys.argv[1], len(w), q(0.5) / 1e3, q(0.9) / 1e3, w[-1] / 1e3))
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
