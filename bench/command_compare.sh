#!/usr/bin/env bash
# Byte-for-byte comparison of every offline command between two builds (a copy
# of the previous binary and the current one), for refactors that must not
# change behaviour: info, dump, latency, report, translate, export (every
# format), throughput, rates, top --batch on a finished recording, and a set of
# bad inputs (their messages and exit codes). Each case compares stdout, stderr
# (temporary paths taken out), the exit code and every file written.
#
# The traces: a real 3-node recording of the demo pipeline (tools/demo.sh,
# namespaces, MinRTT, simulated clocks), made once by this tree's build and kept
# in build/compare-traces (delete it to record again), and generated translated
# runs (bench/bench_latency_trace). Needs root for the one recording.
#
#   bench/command_compare.sh OLD_CPTRACE [NEW_CPTRACE (build/cptrace)]
#
# Prints one line per case; exits 1 on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$(realpath "${1:?usage: command_compare.sh OLD_CPTRACE [NEW_CPTRACE]}")
new=$(realpath "${2:-build/cptrace}")
traces=$PWD/build/compare-traces
tmp=$(mktemp -d -t cptrace-command-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

# The recording, once (a lock, so two comparisons at once share it).
exec 8>"$PWD/build/.compare-traces.lock"
flock 8
if [[ ! -f $traces/merged/meta.json ]]; then
  rm -rf "$traces"
  echo "recording the demo pipeline into $traces (once)"
  DEMO_KEEP=$traces DEMO_PREFIX=cpcmp bash tools/demo.sh >"$tmp/demo.log" 2>&1 || {
    tail -20 "$tmp/demo.log" >&2
    rm -rf "$traces"
    exit 1
  }
  build/bench/bench_latency_trace 20000 "$traces/gen-scrambled" scrambled >/dev/null
  build/bench/bench_latency_trace 20000 "$traces/gen-in-order" in-order >/dev/null
fi
flock -u 8
T=$traces

fail=0 cases=0
# run BIN DIR ARGS...: in DIR (empty, for files the command writes), stdout,
# stderr with this run's paths taken out, the exit code, then each written file.
run() {
  local bin=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  (cd "$dir" && "$bin" "$@" >"$dir.out" 2>"$dir.err") && echo "exit 0" >"$dir.rc" || echo "exit $?" >"$dir.rc"
  sed -i "s|$dir|OUT|g; s|$tmp|TMP|g; s|$bin|CPTRACE|g" "$dir.err" "$dir.out"
  # What a run's own time changes: translate's "in 0.01 s" and meta.json's
  # "seconds" (how long it took), nothing else.
  sed -i -E 's/ in [0-9.]+ s / in S s /' "$dir.err" "$dir.out"
  find "$dir" -name meta.json -exec sed -i -E 's/"seconds": [0-9.e+-]+/"seconds": S/' {} +
}
# check LABEL ARGS...: the command with OUT in ARGS replaced by the case's
# output directory, under both builds.
check() {
  local label=$1
  shift
  cases=$((cases + 1))
  local a=$tmp/$cases.old b=$tmp/$cases.new args_a=() args_b=()
  for x in "$@"; do
    args_a+=("${x//OUT/$a}")
    args_b+=("${x//OUT/$b}")
  done
  run "$old" "$a" "${args_a[@]}"
  run "$new" "$b" "${args_b[@]}"
  local same=1
  for s in out err rc; do cmp -s "$a.$s" "$b.$s" || same=0; done
  diff -r -q "$a" "$b" >/dev/null || same=0
  if ((same)); then
    echo "  same       $label"
  else
    echo "  DIFFERENT  $label"
    for s in out err rc; do diff "$a.$s" "$b.$s" | head -4 | sed "s/^/    $s: /" || true; done
    diff -r -q "$a" "$b" | head -4 | sed 's/^/    /' || true
    fail=1
  fi
  rm -rf "$a" "$b" "$a".* "$b".*
}

# Inspection, each node and the translated run.
for d in A B C merged gen-scrambled/out gen-in-order/out; do
  [[ -e $T/$d ]] || continue
  check "info $d" info "$T/$d"
  check "info --json $d" info --json "$T/$d"
  check "dump $d" dump "$T/$d"
  check "dump --csv $d" dump --csv "$T/$d"
done
check "info (a run)" info "$T"

# translate: the whole output directory and its messages.
check "translate" translate "$T/A" "$T/B" "$T/C" --reference A -o OUT/t
for m in ratio hull; do
  check "translate --method $m" translate "$T/A" "$T/B" "$T/C" --reference B --method $m -o OUT/t
done

# latency: translated hops, one node's own pair, every form, in and out of memory.
for hop in "A.out B.in" "B.in B.out" "B.out C.in" "A.out C.in"; do
  set -- $hop
  for form in "" --json --csv; do
    check "latency merged $1 $2 $form" latency "$T/merged" --from "$1" --to "$2" $form
  done
  check "latency merged $1 $2 --memory 1M" latency "$T/merged" --from "$1" --to "$2" --json --memory 1M
done
check "latency B (one node)" latency "$T/B" --from B.in --to B.out --json

# report: a path, a pair, node sections; one node's own report.
check "report merged" report "$T/merged" -o OUT/r.html --path A.out,B.in,B.out,C.in --pair A.out,C.in \
  --node-dir "$T/A" --node-dir "$T/B" --node-dir "$T/C"
check "report B" report "$T/B" -o OUT/r.html --pair B.in,B.out --path B.in,B.out
check "report merged --memory 1M" report "$T/merged" -o OUT/r.html --path A.out,B.in,B.out,C.in --memory 1M

# export: every format.
for f in ctf json csv; do
  check "export $f A" export $f "$T/A" -o OUT/x
  check "export $f merged" export $f "$T/merged" -o OUT/x
done
check "export table" export table "$T/merged" -o OUT/x --pair A.out,C.in
check "export table --plain" export table "$T/merged" -o OUT/x --plain --pair B.in,B.out
check "export table --parquet" export table "$T/merged" -o OUT/x --parquet --pair A.out,B.in --threads 2
check "export table --stdout" export table "$T/merged" --stdout events

# throughput, rates, top on a finished recording.
for form in "" --csv --json; do
  check "throughput B $form" throughput "$T/B" --period 100 $form
  check "rates B $form" rates "$T/B" --channel-pair B.in,B.out $form
done
check "throughput B --channel" throughput "$T/B" --channel B.out --period 50
check "top --batch B" top "$T/B" --batch --iterations 1 --pair B.in,B.out

# Bad input: the message and the exit code.
check "bad: no such dir" info "$T/nope"
check "bad: unknown channel" latency "$T/merged" --from A.out --to Z.in
check "bad: pair of three" report "$T/merged" -o OUT/r.html --pair A.out,B.in,C.in
check "bad: pair of one" export table "$T/merged" -o OUT/x --pair A.out
check "bad: export format" export xml "$T/A" -o OUT/x
check "bad: parquet with ctf" export ctf "$T/A" -o OUT/x --parquet
check "bad: rates pair" rates "$T/B" --channel-pair B.in
check "translate one node" translate "$T/A" -o OUT/t
check "bad: report period on translated" report "$T/merged" -o OUT/r.html --period 10
check "bad: memory" latency "$T/merged" --from A.out --to B.in --memory lots

echo "command_compare: $cases cases, $([[ $fail == 0 ]] && echo "all the same" || echo "SOME DIFFERENT")"
exit $fail
