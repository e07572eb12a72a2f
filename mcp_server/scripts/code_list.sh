#!/bin/sh
# The sealed snapshots of one project and the runs that name them, for prune_code's plan.
# $1 the project's code dir  $2 the durable root (whose .rgt/runs/*/run.json are read)
# Prints `latest <id>`, `snap <id> <sealed epoch> <files> <bytes>` (bytes as `du` counts that
# snapshot alone: files shared with other snapshots by hard links are counted in each), and
# `used <id> <run id>` for every run.json that records the snapshot as its code.
set -u
dir=$1 root=$2
[ -d "$dir" ] || exit 0
l=$(readlink -- "$dir/latest" 2>/dev/null) && printf 'latest %s\n' "$l"
for m in "$dir"/.meta/*.sha; do
  [ -f "$m" ] || continue
  id=$(basename -- "$m" .sha)
  [ -d "$dir/$id" ] || continue
  printf 'snap %s %s %s %s\n' "$id" "$(stat -c %.9Y -- "$m")" "$(wc -l < "$m")" "$(du -sb -- "$dir/$id" | cut -f1)"
done
for r in "$root"/.rgt/runs/*/run.json; do
  [ -f "$r" ] || continue
  id=$(sed -n 's/.*"code_snapshot": *"\([0-9a-f]\{16\}\)".*/\1/p' "$r" | head -n 1)
  [ -n "$id" ] && printf 'used %s %s\n' "$id" "$(basename -- "$(dirname -- "$r")")"
done
exit 0
