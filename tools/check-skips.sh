#!/usr/bin/env bash
# Fails when the gtest run whose XML report is REPORT skipped a test that
# ALLOWLIST does not name. Usage: check-skips.sh REPORT ALLOWLIST
# A skip hides a test that did not run, so `make test` treats it as a failure;
# tests/skip-allowlist.txt documents the format of the allow-list.
set -euo pipefail
(( $# == 2 )) || { echo "usage: $0 REPORT.xml ALLOWLIST" >&2; exit 2; }
report=$1 allow=$2
[[ -s $report ]] || { echo "check-skips: no test report at $report (did the test binary run?)" >&2; exit 1; }
[[ -r $allow ]] || { echo "check-skips: cannot read the allow-list $allow" >&2; exit 1; }

# Allowed test names: the first word of each line that is not blank or a comment.
allowed=$(awk '!/^[[:space:]]*(#|$)/ { print $1 }' "$allow")

# One line per skipped test: "Suite.Name<TAB>message" (XML entities decoded,
# newlines of the message shown as " | ").
skipped=$(awk '
  function attr(s, key,   m) {
    if (match(s, key "=\"[^\"]*\"")) { m = substr(s, RSTART + length(key) + 2, RLENGTH - length(key) - 3); return m }
    return ""
  }
  function unescape(s) {
    gsub(/&#x0A;/, " | ", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s)
    gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&amp;/, "\\&", s)
    sub(/( \| )+$/, "", s)
    return s
  }
  /<testcase / { name = attr($0, "classname") "." attr($0, "name"); skip = ($0 ~ /result="skipped"/) }
  /<skipped / && skip { print name "\t" unescape(attr($0, "message")); skip = 0 }
' "$report")

bad=0
while IFS=$'\t' read -r name msg; do
  [[ -n $name ]] || continue
  if grep -qxF -- "$name" <<<"$allowed"; then
    echo "check-skips: $name skipped (allowed by $allow): $msg"
  else
    echo "check-skips: SKIPPED $name: $msg" >&2
    bad=$((bad + 1))
  fi
done <<<"$skipped"
if (( bad > 0 )); then
  echo "check-skips: $bad test(s) skipped; a skip hides a test that did not run. Give the machine what" \
       "the test needs, or list the test with a reason in $allow." >&2
  exit 1
fi
