#!/bin/sh
# Cancel a whole Slurm sweep (its job arrays) in one round trip: write the cancel record into the
# run dir of every cell still queued or running (tmp + rename, before any signal, so those cells
# read `cancelled` once they stop; cells that already ended are left as they are), then FIRST
# (optional) and TERM to every process of every array (--full), each followed by up to TENTHS of
# grace, then plain scancel, and wait until the arrays have left the queue.
# Needs the Slurm engine library (rgt_slurm_wait).
# $1 array dir  $2 the cancel record  $3 first signal or ""  $4 grace in tenths  $5... live run dirs
# Exit 3: no such array dir (or no job arrays recorded in it).
qd=$1 rec=$2 first=$3 tenths=$4
shift 4
[ -f "$qd/slurm_array_ids" ] || exit 3
for d in "$@"; do
  [ -d "$d" ] && printf '%s\n' "$rec" > "$d/cancelled.tmp" && mv -f -- "$d/cancelled.tmp" "$d/cancelled"
done
ids=""
while IFS= read -r id; do case "$id" in ''|*[!0-9]*) ;; *) ids="$id${ids:+ }$ids";; esac; done < "$qd/slurm_array_ids"
wait_all() { for id in $ids; do rgt_slurm_wait "$id" "$1"; done; }
# Cells that have not started go first (signalling a pending job only makes scancel retry), the
# later arrays before the earlier ones, so that no chunk starts on its dependency meanwhile.
# shellcheck disable=SC2086  # $ids: job ids, digits only
scancel --state=PENDING $ids 2>/dev/null
if [ -n "$first" ]; then
  # shellcheck disable=SC2086
  scancel --state=RUNNING --signal="$first" --full $ids 2>/dev/null; wait_all "$tenths"
fi
# shellcheck disable=SC2086
scancel --state=RUNNING --signal=TERM --full $ids 2>/dev/null; wait_all "$tenths"
# shellcheck disable=SC2086
scancel $ids 2>/dev/null; wait_all 300
# No cell will start now: no cell needs its secrets file.
cat "$qd"/chunk-* 2>/dev/null | while IFS= read -r d; do rm -f -- "$d/secrets.env" "$d/secrets.attempt"; done
exit 0
