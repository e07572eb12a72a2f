#!/bin/sh
# verify_artifacts, packed pull: stop the packer if it still runs and remove its job directory
# (only the files the packer writes, then the directory, then .rgt-pull/ when it is left empty).
# $1 the job directory
j=$1
[ -d "$j" ] || exit 0
if [ ! -f "$j/out" ] && [ -s "$j/pid" ]; then kill -TERM "-$(cat "$j/pid")" 2>/dev/null; fi
rm -f "$j/list" "$j/run.sh" "$j/packer.py" "$j/pack.tar" "$j/err" "$j/out" "$j/out.tmp" "$j/pid"
rmdir "$j" 2>/dev/null
case $j in
  */.rgt-pull/pack-*) rmdir "${j%/*}" 2>/dev/null ;;
esac
echo RGT-CLEAN
