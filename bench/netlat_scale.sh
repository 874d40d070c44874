#!/usr/bin/env bash
# How fast `cptrace netlat` answers, per packet. Two testbed nodes (no added delay)
# record the network only (`record --net --netns self --peers`, keyed MinRTT
# rounds) while A streams NETLAT_MESSAGES TCP messages (100-3100 bytes) to B; then
# netlat relates the nodes and bounds every matched packet. Prints the packets each
# node recorded, the matched ones, netlat's wall time, ns per matched packet and its
# peak memory, beside `translate` of the same traces (which reads, matches and
# relates the same way, then writes). Prints figures only.
#
# With NETLAT_WRITES=1 the nodes also stamp send calls (--net-send-calls) and
# `netlat --writes` (packets and the application's view of every write) is timed
# beside plain netlat; NETLAT_BASELINE=OTHER_CPTRACE times that build's netlat
# (and --writes) on the same traces, for a ratio in the same run.
#
# Usage (root, from the repository): bench/netlat_scale.sh [CPTRACE]
#   NETLAT_MESSAGES (default 300000).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=$REPO/build
bin=${1:-$B/cptrace}
msgs=${NETLAT_MESSAGES:-300000}
calls=(); [[ -n ${NETLAT_WRITES:-} ]] && calls=(--net-send-calls)
prefix=cpn
tmp=$(mktemp -d /tmp/cptrace-netlat.XXXXXX)
cleanup() {
  "$REPO/tools/testbed.sh" down --prefix $prefix >/dev/null 2>&1 || true
  [[ -n ${NETLAT_KEEP:-} ]] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
"$REPO/tools/testbed.sh" up 2 --prefix $prefix >/dev/null
"$bin" keygen -o "$tmp/key" >/dev/null

pids=()
for k in 2 1; do  # B first: its responder answers A's rounds
  n=$([[ $k == 1 ]] && echo A || echo B)
  peer=$([[ $k == 1 ]] && echo 10.77.2.2 || echo 10.77.1.2)
  ip netns exec ${prefix}$k "$bin" record --no-progress --net "${calls[@]}" --netns self --node $n --peers $peer:7711 \
    --key "$tmp/key" --sync-wait 20 -o "$tmp/$n" 2>"$tmp/$n.err" &
  pids+=($!)
done
for n in A B; do
  for _ in $(seq 600); do grep -q attached "$tmp/$n.err" && break; sleep 0.05; done
done
sleep 3  # the start rounds
ip netns exec ${prefix}2 "$B/tests/netload" server tcp 10.77.2.2 9200 >/dev/null &
server=$!
sleep 0.3
ip netns exec ${prefix}1 "$B/tests/netload" client tcp 10.77.2.2 9200 "$msgs" >/dev/null
wait $server || true
kill -INT "${pids[@]}"
wait "${pids[@]}" || true

for n in A B; do
  echo "node $n: $(grep -oE '[0-9]+ network events recorded, [0-9]+ dropped' "$tmp/$n.err" || echo '? network events')"
done
/usr/bin/time -f "%e %M" -o "$tmp/ttime" "$bin" translate "$tmp/A" "$tmp/B" --reference A -o "$tmp/tr" >/dev/null
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" netlat "$tmp/A" "$tmp/B" --reference A --json >"$tmp/out.json"
read -r secs kib <"$tmp/time"
read -r tsecs tkib <"$tmp/ttime"
matched=$(python3 -c "import json,sys; print(sum(f['matched'] for f in json.load(open(sys.argv[1]))['flows']))" \
  "$tmp/out.json")
python3 - "$secs" "$kib" "$matched" "$tsecs" "$tkib" <<'PY'
import sys
secs, kib, matched, tsecs, tkib = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
print(f"netlat: {matched} matched packets in {secs:.2f} s wall: "
      f"{secs * 1e9 / max(matched, 1):.0f} ns per matched packet, peak RSS {kib / 1024:.0f} MiB")
print(f"translate of the same traces: {tsecs:.2f} s wall, peak RSS {tkib / 1024:.0f} MiB "
      f"(netlat / translate: {secs / tsecs:.2f}x time, {kib / tkib:.2f}x memory)")
PY

# One more netlat run: "LABEL BIN ARGS..." prints its wall time and peak RSS.
timed() {
  local label=$1 b=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$tmp/t1" "$b" netlat "$tmp/A" "$tmp/B" --reference A --json "$@" >/dev/null
  read -r s k <"$tmp/t1"
  echo "$label: $s s wall, peak RSS $((k / 1024)) MiB"
}
[[ -n ${NETLAT_WRITES:-} ]] && timed "netlat --writes" "$bin" --writes
if [[ -n ${NETLAT_BASELINE:-} ]]; then
  timed "baseline netlat" "$NETLAT_BASELINE"
  [[ -n ${NETLAT_WRITES:-} ]] && timed "baseline netlat --writes" "$NETLAT_BASELINE" --writes
fi
