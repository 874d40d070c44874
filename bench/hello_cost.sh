#!/bin/sh
# What the hello (docs/record.md#the-hello) costs a process: bench_hello's
# fork + exit + wait, each child saying hello from libcptrace's fork handler,
# with no recorder and under `cptrace record --all` (each child then waits for
# the recorder's answer), alternately, REPS times (the machine's load drifts).
#
#   bench/hello_cost.sh [N] [REPS]        (root)
#
# Prints each run, then the median microseconds per fork of each case, and the
# hello's system calls alone (ns, no recorder answering).
set -eu
N=${1:-500} REPS=${2:-5}
B=$(cd "$(dirname "$0")/../build" && pwd)
tmp=$(mktemp -d)
rec=
trap '[ -n "$rec" ] && kill -INT $rec 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
for rep in $(seq "$REPS"); do
  echo "none $("$B/bench/bench_hello" --n "$N")" | tee -a "$tmp/all"
  rm -rf "$tmp/t"
  "$B/cptrace" record --all --no-progress -o "$tmp/t" 2>"$tmp/rec.err" &
  rec=$!
  until grep -q attached "$tmp/rec.err" 2>/dev/null; do sleep 0.1; done
  echo "all $("$B/bench/bench_hello" --n "$N")" | tee -a "$tmp/all"
  kill -INT $rec
  wait $rec || true
  rec=
done
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "== median"
for which in none all; do
  echo "$which us/fork=$(sed -n "s/^$which .*us\/fork=\([0-9.]*\).*/\1/p" "$tmp/all" | med)" \
       "hello_syscalls_ns=$(sed -n "s/^$which .*hello_syscalls_ns=\([0-9.]*\).*/\1/p" "$tmp/all" | med)"
done
