#!/bin/sh
# Start an on-box queue: one run dir per command (marked `queued`), the runner detached, then
# each run's state after the probe. Needs job_state.sh, job_run_files.sh and job_launch_lib.sh.
# Secrets on stdin.
# $1 queue dir  $2 at most this many at once  $3 probe seconds  $4 queue.sh contents
# $5 workdir  $6 1: each cell works in its own <run dir>/work, the workdir's (a push_code
# snapshot's) entries linked in; 0: in the workdir  $7 env.sh  $8 wrapper.sh
# $9 the disk floor ("<KiB> <inodes>" free, checked before each cell)
# $10 on_exit.sh of every cell ("": none)  then per run: run id, run.json, cmd.sh, sync_spec ("": none)
set -u
qd=$1 k=$2 probe_s=$3 runner=$4 workdir=$5 linked=$6 env=$7 wrapper=$8 floor=$9 on_exit=${10}
shift 10
runs=$(dirname "$qd")
mkdir "$qd" || exit 1
# Until the runner starts, a failure (a cell's files that could not be written) leaves nothing
# behind: no cell may read queued for a runner that never came.
abandon() { while IFS= read -r c; do rm -rf -- "${runs:?}/$c"; done 2>/dev/null < "$qd/children"; rm -rf -- "$qd"; }
trap abandon EXIT
cat /proc/sys/kernel/random/boot_id > "$qd/boot_id" 2>/dev/null
printf '%s\n' "$floor" > "$qd/disk_floor"
while [ $# -ge 4 ]; do
  cwd=$workdir; [ "$linked" = 1 ] && cwd=$runs/$1/work
  rgt_make_run "$runs/$1" "$cwd" "$2" "$3" "$env" "$wrapper" "$4" "$on_exit"
  printf '%s\n' "${qd##*/}" > "$runs/$1/queued"
  printf '%s\n' "$1" >> "$qd/children"
  # A sealed snapshot is never written: the cell works in its own dir, the code linked in.
  if [ "$linked" = 1 ] && ! rgt_code_links "$workdir" "$cwd" 2>/dev/null; then echo "RGT-WRITE-FAILED $cwd"; exit 1; fi
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
