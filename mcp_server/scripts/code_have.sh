#!/bin/sh
# push_code, first round trip: what the box already has for a snapshot.
# $1 the project's code dir (<durable_root>/code/<project>)  $2 the snapshot id
# Prints key=value lines: exists=1 when the snapshot is sealed; df_avail=<bytes> df_ifree=<inodes>
# of the filesystem it lands on; then `have <sha256> <path under $1>` for one file per content
# the sealed snapshots hold (from their .meta/<id>.sha manifests), and `staged <sha256> <path>`
# for files an interrupted push of this snapshot already left in .staging/<id>/.
# stdin: the snapshot's manifest (sha256sum format) as this push computed it. When the snapshot is
# sealed already, it is proven against it (anyone who can write on the box may have edited it
# since): `altered <path>` for a file whose content differs or is gone, `extra <path>` for a file
# the manifest does not name, and read_only=1 when no file or folder of it is writable.
set -u
dir=$1 id=$2
mkdir -p -- "$dir/.meta" "$dir/.staging" || exit 3
if [ -d "$dir/$id" ] && [ -f "$dir/.meta/$id.sha" ]; then
  echo exists=1
  want=$(mktemp) || exit 3
  cat > "$want"
  (cd -- "$dir/$id" && sha256sum --quiet -c "$want" 2>/dev/null) | sed -n 's/: FAILED.*$//p' | head -n 50 |
    sed 's/^/altered /'
  (cd -- "$dir/$id" && find . -type f ! -path './.rgt/*' | sed 's|^\./||' | sort) > "$want.found"
  awk '{ print substr($0, 67) }' "$want" | sort | comm -23 "$want.found" - | head -n 50 | sed 's/^/extra /'
  rm -f -- "$want" "$want.found"
  if [ -n "$(find "$dir/$id" -perm /222 -print -quit)" ]; then echo read_only=0; else echo read_only=1; fi
else
  echo exists=0
  cat > /dev/null
fi
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
