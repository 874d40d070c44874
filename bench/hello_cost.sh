#!/bin/sh
# What the hello (docs/record.md#the-hello) costs a process at its start: the
# time of N sequential starts of a program using libcptrace (the test workload,
# logging nothing), with no recorder, then under `cptrace record --all` (each
# start waits for the recorder's answer), alternately, REPS times.
#
#   bench/hello_cost.sh [N] [REPS]        (root)
#
# Prints the mean start (fork, exec, load, hello, exit) in microseconds per
# process for each case, and the medians.
set -eu
N=${1:-200} REPS=${2:-3}
B=$(cd "$(dirname "$0")/../build" && pwd)
tmp=$(mktemp -d)
rec=
trap '[ -n "$rec" ] && kill -INT $rec 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
starts() {  # mean microseconds per start of N workloads
  t0=$(date +%s%N)
  i=0
  while [ $i -lt "$N" ]; do
    LD_LIBRARY_PATH=$B "$B/tests/workload" --events 0 --threads 1 --channels 1 >/dev/null
    i=$((i + 1))
  done
  echo $((($(date +%s%N) - t0) / N / 1000))
}
for rep in $(seq "$REPS"); do
  echo "none $(starts)" | tee -a "$tmp/all"
  rm -rf "$tmp/t"
  "$B/cptrace" record --all --no-progress -o "$tmp/t" 2>"$tmp/rec.err" &
  rec=$!
  until grep -q attached "$tmp/rec.err" 2>/dev/null; do sleep 0.1; done
  echo "all $(starts)" | tee -a "$tmp/all"
  kill -INT $rec
  wait $rec || true
  rec=
done
echo "== median us per process start"
for which in none all; do
  echo "$which $(awk -v w=$which '$1 == w {print $2}' "$tmp/all" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
