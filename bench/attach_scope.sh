#!/bin/sh
# ns/event of the single and batch paths under `cptrace record -- CMD`, for two
# cptrace builds run alternately in the same session (the machine's load
# drifts): e.g. one attaching uprobes to every process of the library and one
# attaching them to the recorded process only.
#
#   bench/attach_scope.sh BEFORE_CPTRACE AFTER_CPTRACE [REPS]
#
# Both record this build's bench_logts. Prints one line per run, then the
# median of each (build, path).
set -eu
BEFORE=$1 AFTER=$2 REPS=${3:-5}
B=$(cd "$(dirname "$0")/../build" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rep in $(seq "$REPS"); do
  for which in before after; do
    if [ $which = before ]; then C=$BEFORE; else C=$AFTER; fi
    for path in single batch; do
      n=2000000; [ $path = batch ] && n=20000000
      rm -rf "$tmp/t"
      ns=$("$C" record --no-progress -o "$tmp/t" -- "$B/bench/bench_logts" --only $path --n $n 2>/dev/null |
           sed -n 's/.*ns\/event=\([0-9.]*\).*/\1/p')
      echo "$which $path $ns" | tee -a "$tmp/all"
    done
  done
done
echo "== median ns/event"
for which in before after; do
  for path in single batch; do
    grep "^$which $path " "$tmp/all" | awk '{print $3}' | sort -n |
      awk -v w=$which -v p=$path '{a[NR]=$1} END {printf "%-6s %-6s %.1f\n", w, p, a[int((NR+1)/2)]}'
  done
done
