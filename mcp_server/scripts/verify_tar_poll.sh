#!/bin/sh
# verify_artifacts, packed pull: where the packer is. Prints RGT-GONE (no job directory), RGT-DEAD
# (the packer stopped without finishing), RGT-PACKING, or its result (pack_rc=, sha256=, bytes=)
# followed by RGT-ERR and the tail of its errors.
# $1 the job directory
j=$1
[ -d "$j" ] || { echo RGT-GONE; exit 0; }
if [ ! -f "$j/out" ] && [ -s "$j/pid" ] && ! kill -0 "$(cat "$j/pid")" 2>/dev/null && [ ! -f "$j/out" ]; then
  echo RGT-DEAD; exit 0
fi
if [ -f "$j/out" ]; then
  cat "$j/out"; echo RGT-ERR; tail -c 2000 "$j/err" 2>/dev/null
else
  echo RGT-PACKING
fi
