#!/usr/bin/env bash
# The include rule of user/ (docs/architecture.md). Usage: check-layers.sh LAYER...
# (bottom-up; `make check-layers` passes the Makefile's LAYERS). A file in user/X/
# includes headers of X and of the folders before X, never of a later one, and
# names every project header by its folder ("trace/clock_map.h"), so the folder
# of each include is visible where it is written. Prints every violation and
# exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
(( $# > 0 )) || { echo "usage: $0 LAYER... (bottom-up)" >&2; exit 2; }
LAYERS=("$@")
declare -A rank
for i in "${!LAYERS[@]}"; do rank[${LAYERS[$i]}]=$i; done

bad=0
for dir in user/*/; do
  d=$(basename "$dir")
  if [[ -z ${rank[$d]+x} ]]; then echo "user/$d: folder not in LAYERS (Makefile)"; bad=1; continue; fi
  for f in "$dir"*; do
    while IFS=: read -r line inc; do
      if [[ $inc == */* ]]; then
        to=${inc%%/*}
        if [[ -z ${rank[$to]+x} ]]; then echo "$f:$line: \"$inc\": unknown folder"; bad=1
        elif (( rank[$to] > rank[$d] )); then echo "$f:$line: \"$inc\": $d/ may not include a later stage ($to/)"; bad=1
        elif [[ ! -f user/$inc ]]; then echo "$f:$line: \"$inc\": no such header"; bad=1; fi
      elif [[ ! -f include/$inc && $inc != *.skel.h ]]; then
        echo "$f:$line: \"$inc\": name project headers by folder (user/X/...) or put them in include/"; bad=1
      fi
    done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
  done
done
[[ $bad == 0 ]] && echo "layers: ${#LAYERS[@]} folders, every include points down or across"
exit $bad
