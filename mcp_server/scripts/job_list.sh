#!/bin/sh
# The runs one engine owns under a runs dir: `run=<id><TAB><run.json in base64>` per run, at most
# the last $4 by name in byte order (queue runners excluded).
# $1 runs dir  $2 engine name  $3 the default engine, which owns a run.json naming none  $4 limit
runs=$1 engine=$2 default=$3 limit=$4
LC_ALL=C; export LC_ALL
[ -d "$runs" ] || exit 0
for d in "$runs"/*/; do
  d=${d%/}; r=${d##*/}
  case "$r" in queue-*) continue;; esac
  [ -f "$d/run.json" ] || continue
  b=$(sed -n 's/.*"backend": *"\([A-Za-z0-9_-]*\)".*/\1/p' "$d/run.json" | head -n 1)
  [ "${b:-$default}" = "$engine" ] || continue
  printf 'run=%s\t%s\n' "$r" "$(head -c 65536 "$d/run.json" | base64 | tr -d '\n')"
done | tail -n "$limit"
