#!/bin/sh
# Start an on-box queue: one run dir per command (marked `queued`), the runner detached, then
# each run's state after the probe. Needs job_state.sh and job_run_files.sh. Secrets on stdin.
# $1 queue dir  $2 at most this many at once  $3 probe seconds  $4 queue.sh contents
# $5 workdir  $6 env.sh  $7 wrapper.sh  $8 the disk floor ("<KiB> <inodes>" free, checked before each cell)
# $9 on_exit.sh of every cell ("": none)  then per run: run id, run.json, cmd.sh, sync_spec ("": none)
set -u
qd=$1 k=$2 probe_s=$3 runner=$4 workdir=$5 env=$6 wrapper=$7 floor=$8 on_exit=$9
shift 9
runs=$(dirname "$qd")
mkdir "$qd" || exit 1
# Until the runner starts, a failure (a cell's files that could not be written) leaves nothing
# behind: no cell may read queued for a runner that never came.
abandon() { while IFS= read -r c; do rm -rf -- "${runs:?}/$c"; done 2>/dev/null < "$qd/children"; rm -rf -- "$qd"; }
trap abandon EXIT
cat /proc/sys/kernel/random/boot_id > "$qd/boot_id" 2>/dev/null
printf '%s\n' "$floor" > "$qd/disk_floor"
while [ $# -ge 4 ]; do
  rgt_make_run "$runs/$1" "$workdir" "$2" "$3" "$env" "$wrapper" "$4" "$on_exit"
  printf '%s\n' "${qd##*/}" > "$runs/$1/queued"
  printf '%s\n' "$1" >> "$qd/children"
  shift 4
done
printf '%s' "$runner" > "$qd/queue.sh" || { echo "RGT-WRITE-FAILED $qd"; exit 1; }
trap - EXIT
RGT_SECRETS=$(cat)
printf '%s' "$RGT_SECRETS" | setsid -f bash "$qd/queue.sh" "$k" >/dev/null 2>&1
unset RGT_SECRETS
i=0; while [ ! -f "$qd/pid" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
sleep "$probe_s"
while IFS= read -r rid; do printf 'state.%s=%s\n' "$rid" "$(rgt_state "$runs/$rid")"; done < "$qd/children"
