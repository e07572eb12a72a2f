#!/bin/sh
# push_code: one batch of a snapshot's files, a tar stream on stdin, unpacked into the snapshot's
# staging dir (never into a sealed snapshot), then each file of the batch checked against the
# hash the batch carries (.rgt/batch-<n>.sha); a file that fails is removed so the next push
# sends it again. A stream cut off mid-way fails here and leaves only whole, checked files.
# $1 the project's code dir  $2 the snapshot id  $3 the batch number
set -u
d=$1/.staging/$2 sums=.rgt/batch-$3.sha
mkdir -p -- "$d" || exit 3
tar -x -C "$d" -f - --no-same-owner || exit 4
cd -- "$d" || exit 3
if ! bad=$(sha256sum --quiet -c "$sums" 2>&1); then
  printf '%s\n' "$bad" | sed -n 's/: FAILED.*$//p' | while IFS= read -r f; do rm -f -- "$f"; done
  printf 'hash check failed:\n%s\n' "$(printf '%s\n' "$bad" | head -n 20)"
  exit 6
fi
rm -f -- "$sums"
echo received
