#!/usr/bin/env bash
# docs/architecture.md's table "## Commands and their code" has one row per
# command of the CLI:
#     | `NAME` | `user/cli/cmd_X.cpp` | `user/L/M.cpp` `run_Y` |
# This checks, from the sources: every command that user/cli/ adds (nested ones
# as `cluster record`) has a row and every row a command; the cli file of the row
# adds that command and calls run_Y; run_Y is defined in user/L/M.cpp, not in
# user/cli/, and no cmd_ function is defined below user/cli/ (the naming rule:
# the CLI parses and calls one run_ function of a lower layer). Run by
# `make test` (`make check-architecture`). Prints each mismatch; exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."
DOC=docs/architecture.md
bad=0
fail() { echo "$DOC, commands table: $*"; bad=1; }

# "NAME FILE" for each command added in user/cli/: app.add_subcommand("NAME"
# at the top level, PARENT->add_subcommand("NAME" under the command PARENT adds.
added=$(for f in user/cli/cmd_*.cpp; do
  top=$(grep -o 'app\.add_subcommand("[a-z-]*"' "$f" | sed 's/.*("//; s/"//' | head -1)
  [[ -n $top ]] || continue
  nested=$(grep -o '[a-z]*->add_subcommand("[a-z-]*"' "$f" | sed 's/.*("//; s/"//' || true)
  if [[ -z $nested ]]; then echo "$top $f"; else for n in $nested; do echo "$top $n $f"; done; fi
done | sort)

rows=$(awk '/^## Commands and their code/ {on = 1; next} on && /^#/ {exit} on && /^\| `/' "$DOC")
[[ -n $rows ]] || { fail "no section \"## Commands and their code\" with rows"; exit 1; }

while IFS= read -r line; do
  IFS='|' read -r _ name cli code _ <<<"$line"
  name=$(tr -d '`' <<<"$name" | xargs)
  cli=$(tr -d '`' <<<"$cli" | xargs)
  file=$(grep -o 'user/[a-z_]*/[a-z_]*\.cpp' <<<"$code" | head -1 || true)
  fn=$(grep -o 'run_[a-z_]*' <<<"$code" | head -1 || true)
  grep -qx "$name $cli" <<<"$added" || fail "row \`$name\`: $cli does not add that command"
  [[ -n $file && -n $fn ]] || { fail "row \`$name\`: no \`user/L/M.cpp\` \`run_X\` in \"$code\""; continue; }
  [[ $file != user/cli/* ]] || fail "row \`$name\`: the work is in $file, in the CLI layer"
  [[ -e $file ]] || { fail "row \`$name\`: $file does not exist"; continue; }
  grep -qE "^[A-Za-z].*[ *&]$fn\(" "$file" || fail "row \`$name\`: $fn is not defined in $file"
  grep -qw "$fn" "$cli" || fail "row \`$name\`: $cli does not call $fn"
done <<<"$rows"

# Every command has a row.
while read -r -a w; do
  name="${w[*]:0:${#w[@]}-1}"
  grep -q "^| \`$name\` |" <<<"$rows" || fail "no row for \`$name\` (${w[-1]})"
done <<<"$added"
# The naming rule: no cmd_ function below the CLI.
while IFS= read -r hit; do fail "a cmd_ function outside user/cli/: $hit"; done \
  < <(grep -rnE '^[A-Za-z].*[ *&]cmd_[a-z_]*\(' user --include=*.cpp --include=*.h | grep -v '^user/cli/' || true)
[[ $bad == 0 ]] && echo "commands: $DOC maps all $(wc -l <<<"$added") commands to their code"
exit $bad
