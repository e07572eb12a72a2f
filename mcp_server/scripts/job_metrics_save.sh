#!/usr/bin/env bash
# Save a plot (stdin) into a run dir under the name $2, atomically (tmp file, then rename).
# $1 run dir  $2 file name (no slash)
run=$1 name=$2
[ -d "$run" ] || { echo RGT-NORUN; exit 0; }
tmp="$run/.$name.tmp.$$"
cat >"$tmp" && mv -f -- "$tmp" "$run/$name" && printf 'saved=%s\n' "$run/$name"
