#!/usr/bin/env bash
# docs/architecture.md names every module of user/: each user/X/NAME.h or
# NAME.cpp must appear as `NAME` (or `NAME.h`, `NAME.cpp`) in the section
# "### `user/X/`" of its "Modules" part, and every module that section lists
# ("- `NAME` — ...") must exist. Run by `make test` (`make check-architecture`).
# Prints every module missing or stale; exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
DOC=docs/architecture.md
bad=0
modules=0

# The lines of the section "### `user/X/`", up to the next heading.
section() { awk -v h="### \`user/$1/\`" '$0 == h {on = 1; next} on && /^#/ {exit} on' "$DOC"; }

for dir in user/*/; do
  d=$(basename "$dir")
  text=$(section "$d")
  if [[ -z $text ]]; then echo "$DOC: no section \"### \`user/$d/\`\""; bad=1; continue; fi
  named=$(grep -o '`[A-Za-z0-9_]*\(\.h\|\.cpp\)\?`' <<<"$text" | tr -d '`' | sed 's/\.\(h\|cpp\)$//' | sort -u)
  here=$(ls "$dir" | sed -n 's/\.\(h\|cpp\)$//p' | sort -u)
  for m in $here; do
    grep -qx "$m" <<<"$named" || { echo "user/$d/$m: not named in $DOC (section \"### \`user/$d/\`\")"; bad=1; }
  done
  modules=$((modules + $(wc -w <<<"$here")))
  # What the section lists before the dash of each item must exist.
  while IFS= read -r m; do
    [[ -e $dir$m.h || -e $dir$m.cpp ]] || { echo "$DOC: section \"### \`user/$d/\`\" lists $m, which is not in user/$d/"; bad=1; }
  done < <(grep '^- `' <<<"$text" | sed 's/ — .*//' | grep -o '`[A-Za-z0-9_]*`' | tr -d '`' | sort -u)
done
[[ $bad == 0 ]] && echo "architecture: $DOC names all $modules modules of user/"
exit $bad
