#!/usr/bin/env bash
# The include rule of user/. Usage: check-layers.sh LAYER... (`make check-layers`
# passes the Makefile's LAYERS, the link order, bottom-up).
#
# The graph is written once, as the table between the `layers:` markers of
# docs/architecture.md: one row per folder of user/ and the folders it may
# include. A folder may include itself, the folders its row lists and,
# transitively, whatever those may include ("record: net, sync" lets record/
# include probe/, collect/ and trace/ too). Two folders that reach each other
# through no row are independent: translate/ may not include record/, although
# LAYERS lists record first.
#
# Checked: every folder of user/ has a row and a place in LAYERS, and nothing
# else does; LAYERS lists every folder after all it may include (the archives
# are linked in that order, top-down); every include of a user/ file points
# into its own folder or one it may include, names a header that exists, and
# names project headers by folder ("clock/clock_map.h"), so the folder of each
# include is visible where it is written. Prints every violation; exits 1 if
# there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
(( $# > 0 )) || { echo "usage: $0 LAYER... (bottom-up)" >&2; exit 2; }
LAYERS=("$@")
DOC=docs/architecture.md
bad=0

# ---- the table: "| `folder` | `dep`, `dep` | ..." rows between the markers ----
declare -A deps=()  # folder -> space-separated folders it lists
rows=$(sed -n '/^<!-- layers: begin/,/^<!-- layers: end/p' "$DOC" | grep '^| `' || true)
[[ -n $rows ]] || { echo "$DOC: no layer table (rows between <!-- layers: begin --> and <!-- layers: end -->)"; exit 1; }
while IFS= read -r row; do
  folder=$(cut -d'|' -f2 <<<"$row" | tr -d ' `')
  listed=$(cut -d'|' -f3 <<<"$row" | grep -o '`[a-z_]*`' | tr -d '`' | tr '\n' ' ' || true)
  [[ -z ${deps[$folder]+x} ]] || { echo "$DOC: layer table: two rows for $folder"; bad=1; }
  deps[$folder]=$listed
done <<<"$rows"

for f in "${!deps[@]}"; do
  [[ -d user/$f ]] || { echo "$DOC: layer table: user/$f does not exist"; bad=1; }
  for d in ${deps[$f]}; do
    [[ -n ${deps[$d]+x} ]] || { echo "$DOC: layer table: $f lists $d, which has no row"; bad=1; }
  done
done
(( bad == 0 )) || exit 1

# reach[f] = " f and every folder f may include, transitively ".
declare -A reach=()
reach_of() {
  local f=$1 d out=" $1 "
  [[ -n ${reach[$f]+x} ]] && return
  reach[$f]=" $f "  # a cycle stops here; the LAYERS order check below reports it
  for d in ${deps[$f]}; do
    reach_of "$d"
    out+="${reach[$d]} "
  done
  reach[$f]=" $(tr ' ' '\n' <<<"$out" | sort -u | tr '\n' ' ') "
}
for f in "${!deps[@]}"; do reach_of "$f"; done

# ---- LAYERS (link order) against the table ----
declare -A rank=()
for i in "${!LAYERS[@]}"; do rank[${LAYERS[$i]}]=$i; done
for l in "${LAYERS[@]}"; do
  [[ -n ${deps[$l]+x} ]] || { echo "LAYERS (Makefile): $l has no row in the layer table of $DOC"; bad=1; }
done
for f in "${!deps[@]}"; do
  if [[ -z ${rank[$f]+x} ]]; then echo "LAYERS (Makefile): $f is missing"; bad=1; continue; fi
  for d in ${deps[$f]}; do
    if [[ -n ${rank[$d]+x} ]] && (( rank[$d] >= rank[$f] )); then
      echo "LAYERS (Makefile): $f must come after $d, which it may include"; bad=1
    fi
  done
done

# ---- the includes ----
for dir in user/*/; do
  d=$(basename "$dir")
  if [[ -z ${deps[$d]+x} ]]; then echo "user/$d: folder has no row in the layer table of $DOC"; bad=1; continue; fi
  for f in "$dir"*; do
    while IFS=: read -r line inc; do
      if [[ $inc == */* ]]; then
        to=${inc%%/*}
        if [[ -z ${deps[$to]+x} ]]; then echo "$f:$line: \"$inc\": unknown folder"; bad=1
        elif [[ ${reach[$d]} != *" $to "* ]]; then
          echo "$f:$line: \"$inc\": $d/ may not include $to/ (it may include: $(echo ${reach[$d]}))"; bad=1
        elif [[ ! -f user/$inc ]]; then echo "$f:$line: \"$inc\": no such header"; bad=1; fi
      # Generated into the build directory: BPF skeletons, and X.inc, the literal
      # of an asset X beside the including file (the report's script and style).
      elif [[ ! -f include/$inc && $inc != *.skel.h && ! ( $inc == *.inc && -f $dir${inc%.inc} ) ]]; then
        echo "$f:$line: \"$inc\": name project headers by folder (user/X/...) or put them in include/"; bad=1
      fi
    done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
  done
done
[[ $bad == 0 ]] && echo "layers: ${#LAYERS[@]} folders, every include follows the layer table of $DOC"
exit $bad
