#!/usr/bin/env bash
# Byte-for-byte comparison of `cptrace report` between two builds (a copy of
# the previous binary and the current one), on generated runs
# (bench/bench_latency_trace.cpp), scrambled and in-order ids: the translated
# three-node run with --path, --pair (several, a channel in many pairs) and
# both, one node's own trace with --pair and --path, an unknown channel; each
# with and without a --memory small enough to spill. Compares the HTML page,
# stderr and the exit code; prints one line per case and the two builds'
# seconds; exits 1 on any difference.
#
#   bench/report_compare.sh OLD_CPTRACE [NEW_CPTRACE (build/cptrace)] [TUPLES (300000)]
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: report_compare.sh OLD_CPTRACE [NEW_CPTRACE] [TUPLES]}
new=${2:-build/cptrace}
n=${3:-300000}
tmp=$(mktemp -d -t cptrace-report-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

fail=0
secs_old=0 secs_new=0
# timed VAR BIN ARGS... > out: the page, stderr (the temp dir taken out) and
# the exit code; adds its seconds to VAR.
timed() {
  local var=$1 bin=$2; shift 2
  local t0 t1 rc=0
  rm -f "$tmp/page.html"
  t0=$(date +%s.%N)
  "$bin" report "$@" -o "$tmp/page.html" >"$tmp/o" 2>"$tmp/e" || rc=$?
  t1=$(date +%s.%N)
  printf -v "$var" '%s' "$(awk -v a="${!var}" -v b="$t0" -v c="$t1" 'BEGIN { printf "%.3f", a + c - b }')"
  { cat "$tmp/page.html" 2>/dev/null || echo "(no page)"; echo "-- stdout"; cat "$tmp/o"; echo "-- stderr"; sed "s|$tmp|TMP|g" "$tmp/e"; echo "-- exit $rc"; }
}
check() {  # check LABEL ARGS...: old vs new
  local label=$1; shift
  timed secs_old "$old" "$@" >"$tmp/old"
  timed secs_new "$new" "$@" >"$tmp/new"
  if cmp -s "$tmp/old" "$tmp/new"; then
    echo "  same       $label"
  else
    echo "  DIFFERENT  $label"
    diff "$tmp/old" "$tmp/new" | head -6 | cut -c1-200 | sed 's/^/    /'
    fail=1
  fi
}

path=(--path A.out,B.in,B.out,C.in)
pairs=(--pair A.out,C.in --pair B.in,B.out --pair C.in,A.out --pair A.out,B.in --pair A.out,C.in)
for ids in scrambled in-order; do
  build/bench/bench_latency_trace "$n" "$tmp/$ids" "$ids" | sed 's/^/  /'
  d=$tmp/$ids
  for mem in "" "--memory 16M"; do
    m=${mem:-unbudgeted}
    # shellcheck disable=SC2086
    {
      check "$ids translated path $m" "$d/out" "${path[@]}" $mem
      check "$ids translated pairs $m" "$d/out" "${pairs[@]}" $mem
      check "$ids translated path+pairs $m" "$d/out" "${path[@]}" "${pairs[@]}" $mem
      check "$ids translated one pair $m" "$d/out" --pair B.out,C.in $mem
      check "$ids translated unknown channel $m" "$d/out" --pair A.out,X.in $mem
      check "$ids translated path, unknown channel $m" "$d/out" --path A.out,B.in,X.out $mem
      check "$ids node B pairs $m" "$d/B" --pair B.in,B.out --pair B.out,B.in $mem
      check "$ids node B path $m" "$d/B" --path B.in,B.out $mem
    }
  done
  rm -rf "$d"
done
echo "  seconds: old $secs_old, new $secs_new (all cases)"
exit $fail
