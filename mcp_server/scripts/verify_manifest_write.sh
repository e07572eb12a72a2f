#!/bin/sh
# verify_artifacts: write the manifest (stdin) beside the data without ever replacing one: the first
# free name of PULL_MANIFEST.json, PULL_MANIFEST.2.json, ... (a hard link fails if the name exists).
# $1 the job directory (removed on success)  $2 the result root
j=$1
r=$2
cat > "$j/manifest.json"
for k in "" .2 .3 .4 .5 .6 .7 .8 .9 .10 .11 .12 .13 .14 .15 .16 .17 .18 .19 .20; do
  t="$r/PULL_MANIFEST$k.json"
  if ln "$j/manifest.json" "$t" 2>/dev/null || { [ ! -e "$t" ] && (set -C; cat "$j/manifest.json" > "$t") 2>/dev/null; }; then
    rm -rf -- "$j"; echo "RGT-MANIFEST PULL_MANIFEST$k.json"; exit 0; fi
done
echo RGT-FULL
