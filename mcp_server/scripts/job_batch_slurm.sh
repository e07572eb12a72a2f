#!/bin/bash
# remote-gpu-trainer: the Slurm batch script, written into the run dir (job.sbatch) or, for a
# job array, into the array's dir. Slurm runs it on the compute node: it hands the job to the
# run-dir wrapper with the run's secrets file.
# $1 (job arrays only): the file naming the array's run dirs, one per line, task index 0 first.
set -u
if [ -n "${1:-}" ]; then
  d=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$1")
  [ -d "$d" ] || { echo "rgt: no run dir for array task ${SLURM_ARRAY_TASK_ID} in $1"; exit 96; }
else
  d=$PWD
fi
# The job's own id: an array task's, to ask accounting about it once squeue has forgotten it.
printf '%s\n' "$SLURM_JOB_ID" > "$d/slurm_raw_id"
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
  # Requeued (after a preemption or a node failure): the previous attempt's end is not the run's.
  rm -f -- "$d/exit_code" "$d/ended_at" "$d/pid" "$d/signalled"
  printf '# rgt: Slurm started the job again (restart %s)\n' "$SLURM_RESTART_COUNT" >> "$d/log"
fi
# A job of several tasks or nodes: where its ranks meet (torchrun's rendezvous, init_process_group's
# env:// method). The first node of the allocation hosts it, on a port derived from the job id so
# two jobs sharing a node do not collide; the run's own env.sh, sourced later, may override them.
if [ "${SLURM_NTASKS:-1}" -gt 1 ] || [ "${SLURM_JOB_NUM_NODES:-1}" -gt 1 ]; then
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)
  MASTER_PORT=$((15000 + SLURM_JOB_ID % 20000))
  export MASTER_ADDR MASTER_PORT WORLD_SIZE="${SLURM_NTASKS:-1}" NNODES="${SLURM_JOB_NUM_NODES:-1}"
  export NPROC_PER_NODE="${SLURM_NTASKS_PER_NODE:-1}" RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT"
fi
secrets=$d/secrets.env
if [ -f "$d/requeue" ]; then
  # A job Slurm may run again needs its secrets again: each attempt gets a one-shot copy, and the
  # secrets file goes when an attempt ends on its own (not stopped by a signal).
  secrets=$d/secrets.attempt
  ( umask 077; cp -f -- "$d/secrets.env" "$secrets" 2>/dev/null || : > "$secrets" )
fi
# The time-limit warning (sbatch --signal=B:URG@<s>) reaches this shell only: pass the run's
# warn_signal to the wrapper's process group, where the job's program gets it (the wrapper and
# its shells ignore USR1/USR2). URG, not the signal itself, so that a USR1 that cancel_run sends to
# every process of the job is not passed on a second time. Job control gives the wrapper its own
# process group without ignoring SIGINT, as a plain background job would.
set -m
bash "$d/wrapper.sh" shell "$secrets" &
w=$!
set +m
# shellcheck disable=SC2317  # run by the URG trap
warn() { sig=$(cat "$d/warn_signal" 2>/dev/null)
  case "$sig" in USR1|USR2) ;; *) return 0;; esac
  kill -s "$sig" -- "-$w" 2>/dev/null
  printf '# rgt: Slurm warned of the time limit: SIG%s sent to the job\n' "$sig" >> "$d/log"; }
trap warn URG
# A TERM (scancel, the time limit, a preemption) reaches the wrapper too: this shell waits for it to
# record the end, since Slurm ends the job, and kills what is left of it, once this shell exits.
stopped=
trap 'stopped=1' TERM HUP INT
while kill -0 "$w" 2>/dev/null; do wait "$w"; done
wait "$w"
code=$?
# Slurm stopped this attempt (a requeue, a preemption, the time limit, scancel). The wrapper's own
# trap can miss it when the command died of the same signal first, so this shell says it too:
# an attempt Slurm stopped keeps its secrets for the next one, and its exit code is not the run's.
if [ -n "$stopped" ] && [ ! -f "$d/signalled" ]; then printf 'TERM\n' > "$d/signalled"; fi
[ -f "$d/requeue" ] && [ ! -f "$d/signalled" ] && rm -f -- "$d/secrets.env"
exit "$code"
