#!/usr/bin/env bash
# What `cptrace record -- CMD` costs in wall time around a command that does
# nothing: from launch until CMD runs (start-up: loading and attaching), and
# from CMD's end until record exits (stop: detaching, draining, the last
# frames). Each detach of a classic tracepoint or uprobe waits out a kernel
# grace period; a cluster pays this per node. Median (min-max) of RUNS runs.
# Usage: record_startup.sh CPTRACE [RUNS]
set -euo pipefail
cptrace=$1
runs=${2:-5}
tmp=$(mktemp -d /tmp/cptrace-startup.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s%N; }
ups=() downs=() totals=()
for ((i = 0; i < runs; i++)); do
  s=$(now)
  "$cptrace" record --no-progress -o "$tmp/t$i" -- sh -c "date +%s%N > $tmp/ran" 2>/dev/null
  e=$(now)
  c=$(cat "$tmp/ran")
  ups+=($(((c - s) / 1000000))) downs+=($(((e - c) / 1000000))) totals+=($(((e - s) / 1000000)))
done
stat() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {printf "%d ms (%d-%d)", v[int((NR+1)/2)], v[1], v[NR]}'; }
base_s=$(now)
for ((i = 0; i < runs; i++)); do sh -c true; done
base=$((($(now) - base_s) / runs / 1000000))
echo "   start-up $(stat "${ups[@]}"), stop $(stat "${downs[@]}"), whole $(stat "${totals[@]}"); the command alone: $base ms"
