#!/bin/sh
# verify_artifacts: write the manifest (stdin) to its one place in the state dir, replacing the
# previous round's atomically (tmp + rename): readers see the old manifest or the new, never a
# part. Nothing is written beside the user's data.
# $1 the hashing job's directory (removed on success)  $2 the manifest's path
j=$1
t=$2
mkdir -p -- "${t%/*}" || { echo RGT-FAILED; exit 1; }
if cat > "$t.tmp.$$" && mv -f -- "$t.tmp.$$" "$t"; then
  rm -rf -- "$j"; echo "RGT-MANIFEST $t"; exit 0; fi
rm -f -- "$t.tmp.$$"
echo RGT-FAILED
