#!/bin/sh
# push_code, last round trip: complete the staged snapshot from files the box already has, prove
# every file's hash, move the snapshot into place in one rename, so a reader never sees half a
# tree, and make it read-only, folders included (prints read_only=1 when nothing in it is writable).
# Exit 8 with `changed <snapshot|-> <path>` lines: files taken from the box that failed their hash,
# removed from staging so the push sends them fresh and seals again. The manifest (sha256sum format, paths relative to the
# snapshot) comes on stdin; `latest` then points at it (for people; runs name the id).
# $1 the project's code dir  $2 the snapshot id
set -u
dir=$1 id=$2
st=$dir/.staging/$id
mkdir -p -- "$st/.rgt" || exit 3
cat > "$st/.rgt/manifest.sha" || exit 3
# Files the push did not send: hard-link them from a sealed snapshot with the same content (proven
# below: read-only is no guard against the box's own users), in one cp per source snapshot
# for files at the same path there (the common case), one ln each for a file that moved.
for m in "$dir"/.meta/*.sha; do [ -f "$m" ] && awk -v s="$(basename -- "$m" .sha)" \
  '{ print $1 "\t" s "\t" substr($0, 67) }' "$m"; done > "$st/.rgt/have.tsv"
awk -F '\t' 'NR == FNR { if (!($1 in snap)) { snap[$1] = $2; from[$1] = $3 }; next }
  { h = substr($0, 1, 64); p = substr($0, 67); if (h in snap) print snap[h] "\t" from[h] "\t" p }' \
  "$st/.rgt/have.tsv" "$st/.rgt/manifest.sha" > "$st/.rgt/reuse.tsv"
cut -f1 "$st/.rgt/reuse.tsv" | sort -u | while IFS= read -r snap; do
  awk -F '\t' -v s="$snap" '$1 == s && $2 == $3 { printf "%s%c", $3, 0 }' "$st/.rgt/reuse.tsv" > "$st/.rgt/same"
  (cd -- "$dir/$snap" && { xargs -0 -r cp -l --parents -n -t "$st" -- < "$st/.rgt/same" 2>/dev/null ||
    xargs -0 -r cp -p --parents -n -t "$st" -- < "$st/.rgt/same"; }) || exit 5
done || exit 5
rm -f -- "$st/.rgt/same"
awk -F '\t' '$2 != $3' "$st/.rgt/reuse.tsv" | while IFS="$(printf '\t')" read -r snap from to; do
  [ -f "$st/$to" ] && continue
  mkdir -p -- "$(dirname -- "$st/$to")"
  ln -- "$dir/$snap/$from" "$st/$to" 2>/dev/null || cp -p -- "$dir/$snap/$from" "$st/$to" || exit 5
done || exit 5
missing=$(awk '{ print substr($0, 67) }' "$st/.rgt/manifest.sha" | while IFS= read -r f; do
  [ -f "$st/$f" ] || printf '%s\n' "$f"; done | head -n 20)
if [ -n "$missing" ]; then printf 'missing after the push:\n%s\n' "$missing"; exit 6; fi
# Sent files were proven by their batch, staged ones when the push listed them. A file taken from
# an older snapshot shares its inode, and anything on the box may have edited it since that seal
# (read-only bits stop no owner): each is proven here, before the snapshot it joins is sealed.
awk 'NR == FNR { split($0, f, "\t"); reused[f[3]] = 1; next } (substr($0, 67) in reused)' \
  "$st/.rgt/reuse.tsv" "$st/.rgt/manifest.sha" > "$st/.rgt/reused.sha"
if [ -s "$st/.rgt/reused.sha" ] && ! bad=$(cd -- "$st" && sha256sum --quiet -c .rgt/reused.sha 2>/dev/null); then
  printf '%s\n' "$bad" | sed -n 's/: FAILED.*$//p' | while IFS= read -r f; do
    from=$(p=$f awk -F '\t' '$3 == ENVIRON["p"] { print $1; exit }' "$st/.rgt/reuse.tsv")
    rm -f -- "$st/$f"
    printf 'changed %s %s\n' "${from:--}" "$f"
  done
  exit 8
fi
rm -f -- "$st/.rgt/reuse.tsv" "$st/.rgt/have.tsv" "$st/.rgt/reused.sha"
# Only the manifest's files belong to the snapshot: drop anything else a broken batch left.
( cd -- "$st" && find . -type f ! -path './.rgt/*' | sed 's|^\./||' | sort ) > "$st/.rgt/found"
awk '{ print substr($0, 67) }' "$st/.rgt/manifest.sha" | sort > "$st/.rgt/wanted"
comm -23 "$st/.rgt/found" "$st/.rgt/wanted" | while IFS= read -r extra; do rm -f -- "$st/$extra"; done
rm -f -- "$st/.rgt/found" "$st/.rgt/wanted"
find "$st" -type f -exec chmod a-w {} +
if [ -d "$dir/$id" ]; then
  # Another push sealed the same content first: same id, same bytes.
  chmod -R u+w -- "$st" && rm -rf -- "$st"
else
  # A folder moves only while writable (its `..` changes), so folders go read-only after the move.
  mv -T -- "$st" "$dir/$id" || exit 7
  find "$dir/$id" -type d -exec chmod a-w {} +
fi
# The index of sealed contents, written after the rename: it never names a snapshot not in place.
cp -- "$dir/$id/.rgt/manifest.sha" "$dir/.meta/$id.sha.tmp" && mv -f -- "$dir/.meta/$id.sha.tmp" "$dir/.meta/$id.sha"
ln -sfn -- "$id" "$dir/.latest.tmp" && mv -Tf -- "$dir/.latest.tmp" "$dir/latest"
if [ -n "$(find "$dir/$id" -perm /222 -print -quit)" ]; then echo read_only=0; else echo read_only=1; fi
echo "sealed $dir/$id"
