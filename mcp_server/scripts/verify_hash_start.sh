#!/bin/sh
# verify_artifacts, hashing: set up the job directory and start the hasher detached.
# $1 the job directory  $2 the text of hasher.py  $3 the text of run.sh (verify_hash_run.sh)
# $4... run.sh's arguments. stdin: the files to hash, one path per line, relative to the root.
j=$1
mkdir -p "$j" || exit 1
cat > "$j/list"
printf '%s' "$2" > "$j/hasher.py"
printf '%s' "$3" > "$j/run.sh"
shift 3
setsid -f sh "$j/run.sh" "$@" >/dev/null 2>&1 </dev/null
echo RGT-HASHING
