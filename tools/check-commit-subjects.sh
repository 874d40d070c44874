#!/usr/bin/env bash
# Commit subjects of at most 72 characters (details go in the body), for every
# commit after the one where the rule was adopted. Older history is left as it
# is; a clone without that commit (shallow) checks HEAD only.
set -euo pipefail
cd "$(dirname "$0")/.."
since=b1d4cb9
max=72
if git cat-file -e "$since^{commit}" 2>/dev/null; then range="$since..HEAD"; else range="-1 HEAD"; fi
bad=0
while IFS= read -r line; do
  subject=${line#* }
  if (( ${#subject} > max )); then
    echo "commit ${line%% *}: subject of ${#subject} characters (at most $max): $subject"
    bad=1
  fi
done < <(git log --format='%h %s' $range)
[[ $bad == 0 ]] && echo "commit subjects: all within $max characters"
exit $bad
