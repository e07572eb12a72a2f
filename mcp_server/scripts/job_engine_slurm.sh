#!/bin/sh
# Library: the Slurm engine (engines/slurm.py). A run is a batch job whose batch shell hands it
# to the run-dir wrapper (job_batch_slurm.sh), run by Slurm on a compute node in the run dir
# (which must be on the shared filesystem). The job id is kept in the run dir (slurm_job_id);
# the job's name is the run's.

# The job starts when Slurm schedules it, on a compute node: the launch does not wait for its pid.
# shellcheck disable=SC2034  # read by job_launch_start.sh, which this library is prepended to
RGT_PID_WAIT=0
# Whether the job may be requeued (--requeue), the signal its processes get before the time limit
# (set with the job's options) and the batch script (job_batch_slurm.sh): all defined after this
# library by engines/slurm.py.
RGT_REQUEUE=0
RGT_WARN_SIGNAL=
RGT_BATCH=

# rgt_sbatch ARGS...: sbatch with the run's job options (partition, gpus, time, ...); a launch
# defines its own after this library (engines/slurm.py: sbatch_function).
rgt_sbatch() { sbatch --no-requeue "$@"; }

# rgt_job_files DIR SECRETS: the run's secrets in a 0600 file the wrapper reads (and deletes,
# unless Slurm may run the job again) when the job starts: never in the batch script, sbatch's
# argv or the job's environment as Slurm records it. Also what the batch script must know: that
# the job may be requeued (`requeue`), the signal for the time-limit warning (`warn_signal`).
rgt_job_files() {
  if [ -z "$2" ]; then : > "$1/secrets.env"  # nothing secret in it: its mode does not matter
  else ( umask 077 && printf '%s' "$2" > "$1/secrets.env" ); fi \
    || { echo "RGT-SUBMIT-FAILED cannot write $1/secrets.env"; exit 1; }
  if [ "$RGT_REQUEUE" = 1 ]; then : > "$1/requeue"; fi
  if [ -n "$RGT_WARN_SIGNAL" ]; then printf '%s\n' "$RGT_WARN_SIGNAL" > "$1/warn_signal"; fi
}

# rgt_submit_failed OUT FILES...: report sbatch's message and remove the secrets files.
rgt_submit_failed() { out=$1; shift; rm -f -- "$@"
  printf 'RGT-SUBMIT-FAILED sbatch: %s\n' "$(printf %s "$out" | tr '\n' ' ')"; exit 1; }

# rgt_submit DIR JOB SECRETS: write the batch script and submit it. Slurm's own lines about the
# job (DUE TO TIME LIMIT, oom-kill, requeue) are appended to the run's log, where tail_logs and the
# failure signatures read them.
rgt_submit() {
  d=$1
  rgt_job_files "$d" "$3"
  printf '%s' "$RGT_BATCH" > "$d/job.sbatch"
  # sbatch's answer kept in the run dir rather than captured (one process less); its warnings
  # apart from the job id.
  if ! rgt_sbatch --parsable --job-name "$2" --output "$d/log" --open-mode=append --chdir "$d" \
      "$d/job.sbatch" > "$d/sbatch.out" 2> "$d/sbatch.err"; then
    rgt_submit_failed "$(cat "$d/sbatch.err" "$d/sbatch.out")" "$d/secrets.env"; fi
  IFS= read -r out < "$d/sbatch.out"
  printf '%s\n' "${out%%;*}" > "$d/slurm_job_id"
  printf 'job_id=%s\n' "${out%%;*}"
}

# rgt_slurm_wait ID TENTHS: wait up to TENTHS tenths of a second while the job is still queued
# or running (squeue forgets it once it has left COMPLETING).
rgt_slurm_wait() { i=0
  while [ "$i" -lt "$2" ] && [ -n "$(squeue -h -o %T -j "$1" 2>/dev/null)" ]; do sleep 0.1; i=$((i+1)); done; }

# rgt_cancel DIR JOB FIRST TENTHS: FIRST (e.g. USR1) then TERM to every process of the job
# (--full: the batch shell too), each followed by up to TENTHS of grace, then plain scancel.
# The secrets file a requeueable job keeps goes with it.
rgt_cancel() {
  id=$(cat "$1/slurm_job_id" 2>/dev/null); [ -n "$id" ] || return 0
  case "$id" in *[!0-9_]*) return 0;; esac
  scancel --state=PENDING "$id" 2>/dev/null  # not started: nothing to signal (it only makes scancel retry)
  if [ -n "$3" ]; then scancel --signal="$3" --full "$id" 2>/dev/null; rgt_slurm_wait "$id" "$4"; fi
  scancel --signal=TERM --full "$id" 2>/dev/null; rgt_slurm_wait "$id" "$4"
  scancel "$id" 2>/dev/null; rgt_slurm_wait "$id" 300
  rm -f -- "$1/secrets.env" "$1/secrets.attempt"
  return 0
}
