#!/bin/sh
# push_code, first round trip: what the box already has for a snapshot.
# $1 the project's code dir (<durable_root>/code/<project>)  $2 the snapshot id
# Prints key=value lines: exists=1 when the snapshot is sealed; df_avail=<bytes> df_ifree=<inodes>
# of the filesystem it lands on; then `have <sha256> <path under $1>` for one file per content
# the sealed snapshots hold (from their .meta/<id>.sha manifests), and `staged <sha256> <path>`
# for files an interrupted push of this snapshot already left in .staging/<id>/.
set -u
dir=$1 id=$2
mkdir -p -- "$dir/.meta" "$dir/.staging" || exit 3
if [ -d "$dir/$id" ] && [ -f "$dir/.meta/$id.sha" ]; then echo exists=1; else echo exists=0; fi
df -P -B1 -- "$dir" 2>/dev/null | awk 'NR == 2 { print "df_avail=" $4 }'
df -P -i -- "$dir" 2>/dev/null | awk 'NR == 2 { print "df_ifree=" $4 }'
for m in "$dir"/.meta/*.sha; do
  [ -f "$m" ] || continue
  snap=$(basename -- "$m" .sha)
  awk -v s="$snap" '{ print "have " $1 " " s "/" substr($0, 67) }' "$m"
done | awk '!seen[$2]++'
if [ -d "$dir/.staging/$id" ]; then
  ( cd -- "$dir/.staging/$id" && find . -type f ! -path './.rgt/*' -print0 | xargs -0 -r sha256sum ) |
    awk '{ p = substr($0, 67); sub(/^\.\//, "", p); print "staged " $1 " " p }'
fi
exit 0
