#!/usr/bin/env bash
# Byte-for-byte comparison of `cptrace latency` between two builds (a copy of
# the previous binary and the current one), on generated runs
# (bench/bench_latency_trace.cpp): scrambled and in-order ids, translated
# three-node pairs of every scenario and one node's own trace, text, --json and
# --csv, with and without a --memory small enough to spill, and (when the new
# build has it) --threads 1 and 2. Prints one line per case and the two
# builds' seconds; exits 1 on any difference.
#
#   bench/latency_compare.sh OLD_CPTRACE [NEW_CPTRACE (build/cptrace)] [TUPLES (300000)]
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: latency_compare.sh OLD_CPTRACE [NEW_CPTRACE] [TUPLES]}
new=${2:-build/cptrace}
n=${3:-300000}
tmp=$(mktemp -d -t cptrace-latency-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
threads=()
if "$new" latency --help 2>/dev/null | grep -q -- '--threads'; then threads=("--threads 1" "--threads 2"); fi

fail=0
secs_old=0 secs_new=0
# run BIN ARGS... > out: its stdout and stderr, with the spill directory (a
# temp dir, different every run) taken out; adds its seconds to the total.
timed() {
  local var=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/o" 2>"$tmp/e" || echo "exit $?" >>"$tmp/e"
  t1=$(date +%s.%N)
  printf -v "$var" '%s' "$(awk -v a="${!var}" -v b="$t0" -v c="$t1" 'BEGIN { printf "%.3f", a + c - b }')"
  { cat "$tmp/o"; echo "-- stderr"; sed "s|$tmp|TMP|g" "$tmp/e"; }
}
check() {  # check LABEL ARGS...: old vs new (and new with each --threads)
  local label=$1; shift
  timed secs_old "$old" latency "$@" >"$tmp/old"
  local variants=("")
  variants+=("${threads[@]}")
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    timed secs_new "$new" latency "$@" $v >"$tmp/new"
    if cmp -s "$tmp/old" "$tmp/new"; then
      echo "  same       $label $v"
    else
      echo "  DIFFERENT  $label $v"
      diff "$tmp/old" "$tmp/new" | head -6 | sed 's/^/    /'
      fail=1
    fi
  done
}

for ids in scrambled in-order; do
  build/bench/bench_latency_trace "$n" "$tmp/$ids" "$ids" | sed 's/^/  /'
  d=$tmp/$ids
  for pair in "A.out C.in" "B.in C.in" "A.out B.out" "B.in B.out" "C.in A.out"; do
    set -- $pair
    for form in "" --json --csv; do
      for mem in "" "--memory 16M"; do
        # shellcheck disable=SC2086
        check "$ids $1->$2 ${form:-text} ${mem:-unbudgeted}" "$d/out" --from "$1" --to "$2" $form $mem
      done
    done
  done
  for form in "" --json --csv; do
    for mem in "" "--memory 16M"; do
      # shellcheck disable=SC2086
      check "$ids node B ${form:-text} ${mem:-unbudgeted}" "$d/B" --from B.in --to B.out $form $mem
    done
  done
  rm -rf "$d"
done
echo "  seconds: old $secs_old, new $secs_new (all cases; the new build's include each --threads variant)"
exit $fail
