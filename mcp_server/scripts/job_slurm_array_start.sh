#!/bin/sh
# Start a sweep on Slurm as job arrays: one run dir per command (the same contract as a single
# launch), listed in chunk files of at most $3 run dirs, each chunk ONE `sbatch --array=0-N%K`
# whose task i runs the chunk's line i+1. A chunk waits for the one before it (afterany), so no
# more than K cells ever run at once. Needs job_state.sh, job_run_files.sh, job_launch_lib.sh and
# the Slurm engine library with rgt_sbatch. Secrets on stdin.
# $1 array dir  $2 at most this many at once  $3 job name  $4 workdir  $5 1: each cell works in its
# own <run dir>/work, the workdir's (a push_code snapshot's) entries linked in; 0: in the workdir
# $6 env.sh  $7 wrapper.sh  $8 on_exit.sh ("": none)
# then per run: run id, run.json, cmd.sh, sync_spec ("": none)
set -u
qd=$1 k=$2 job=$3 workdir=$4 linked=$5 env=$6 wrapper=$7 on_exit=$8
shift 8
# MaxArraySize bounds the largest index (not the count): a chunk holds indices 0..MaxArraySize-1.
per=$(scontrol show config 2>/dev/null | awk '$1 == "MaxArraySize" { print $3 }')
case "$per" in ''|*[!0-9]*|0) per=1001;; esac
runs=$(dirname "$qd")
mkdir "$qd" || { echo RGT-MKDIR-FAILED; exit 1; }
RGT_SECRETS=$(cat)
# Until the cells are all written, a failure leaves none of them behind.
trap 'cat "$qd"/chunk-* 2>/dev/null | while IFS= read -r r; do rm -rf -- "$r"; done; rm -rf -- "$qd"' EXIT
n=0
while [ $# -ge 4 ]; do
  cwd=$workdir; [ "$linked" = 1 ] && cwd=$runs/$1/work
  rgt_make_run "$runs/$1" "$cwd" "$2" "$3" "$env" "$wrapper" "$4" "$on_exit"
  printf '%s\n' "$runs/$1" >> "$qd/chunk-$((n / per))"
  rgt_job_files "$runs/$1" "$RGT_SECRETS"
  # A sealed snapshot is never written: the cell works in its own dir, the code linked in.
  if [ "$linked" = 1 ] && ! rgt_code_links "$workdir" "$cwd" 2>/dev/null; then echo "RGT-WRITE-FAILED $cwd"; exit 1; fi
  n=$((n + 1))
  shift 4
done
unset RGT_SECRETS
trap - EXIT
printf '%s' "$RGT_BATCH" > "$qd/job.sbatch"
# shellcheck disable=SC2034  # d: where rgt_sbatch keeps the record of its arguments
d=$qd c=0 prev=""
while [ -f "$qd/chunk-$c" ]; do
  last=$(($(wc -l < "$qd/chunk-$c") - 1))
  # Task i of chunk c writes Slurm's lines to its run's log through the link c-i (%a is the index).
  i=0
  while IFS= read -r r; do ln -s "$r" "$qd/$c-$i"; i=$((i + 1)); done < "$qd/chunk-$c"
  set -- --parsable --array="0-$last%$k" --job-name "$job" --output "$qd/$c-%a/log" --open-mode=append \
    --chdir "$qd"
  [ -n "$prev" ] && set -- "$@" --dependency="afterany:$prev"
  if ! out=$(rgt_sbatch "$@" "$qd/job.sbatch" "$qd/chunk-$c" 2>&1); then
    [ -n "$prev" ] && scancel "$(tr '\n' ',' < "$qd/slurm_array_ids")" 2>/dev/null
    cat "$qd"/chunk-* | while IFS= read -r r; do rm -f -- "$r/secrets.env"; done
    rgt_submit_failed "$out"
  fi
  prev=${out%%;*}
  printf '%s\n' "$prev" >> "$qd/slurm_array_ids"
  i=0
  while IFS= read -r r; do printf '%s_%s\n' "$prev" "$i" > "$r/slurm_job_id"; i=$((i + 1)); done < "$qd/chunk-$c"
  c=$((c + 1))
done
echo "RGT-STARTED ${qd##*/}"
