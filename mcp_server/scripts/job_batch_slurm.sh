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
if [ ! -f "$d/requeue" ]; then
  exec bash "$d/wrapper.sh" shell "$d/secrets.env"
fi
# A job Slurm may run again needs its secrets again: each attempt gets a one-shot copy, and the
# secrets file goes when an attempt ends on its own (not stopped by a signal).
( umask 077; cp -f -- "$d/secrets.env" "$d/secrets.attempt" 2>/dev/null || : > "$d/secrets.attempt" )
bash "$d/wrapper.sh" shell "$d/secrets.attempt"
code=$?
[ -f "$d/signalled" ] || rm -f -- "$d/secrets.env"
exit "$code"
