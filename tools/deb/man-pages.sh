#!/usr/bin/env bash
# man-pages.sh CPTRACE VERSION DIR: cptrace.1 and one cptrace-SUBCOMMAND.1 per
# subcommand, made by help2man from the binary's own --help, so a page never says
# what the program does not; gzipped as Debian installs them.
set -euo pipefail
bin=$1 version=$2 dir=$3
install -d "$dir"
wraps=$(mktemp -d)
trap 'rm -rf "$wraps"' EXIT
page() {  # page NAME DESCRIPTION COMMAND...
  local name=$1 what=$2
  shift 2
  # help2man names the page after the program it runs: a wrapper called NAME.
  printf '#!/bin/bash\nexec -a cptrace %s "$@"\n' "$*" >"$wraps/$name"
  chmod 755 "$wraps/$name"
  help2man --no-info --no-discard-stderr --version-string="$version" --name="$what" \
    --section=1 "$wraps/$name" | gzip -9n >"$dir/$name.1.gz"
}
page cptrace "cross-machine durations with strict error bounds" "$bin"
# Subcommands: the lines under "Subcommands:" of the top-level help.
"$bin" --help | sed -n '/^Subcommands:/,$p' | tail -n +2 | while read -r sub what; do
  if [[ -n $sub ]]; then page "cptrace-$sub" "$what" "$bin" "$sub"; fi
done
