#!/bin/sh
# verify_artifacts, hashing: the hasher's exit status once it finished, its output so far, its errors.
# $1 the job directory
if [ -f "$1/rc" ]; then echo "RGT-RC $(cat "$1/rc")"; fi
echo RGT-OUT
cat "$1/out.partial" 2>/dev/null
echo RGT-ERR
tail -c 2000 "$1/err" 2>/dev/null
