#!/bin/sh
# Library: the Slurm engine (engines/slurm.py). A run is a batch job whose batch shell is the
# run-dir wrapper, run by Slurm on a compute node in the run dir (which must be on the shared
# filesystem). The job id is kept in the run dir (slurm_job_id); the job's name is the run's.

# The job starts when Slurm schedules it, on a compute node: the launch does not wait for its pid.
# shellcheck disable=SC2034  # read by job_launch_start.sh, which this library is prepended to
RGT_PID_WAIT=0

# rgt_sbatch ARGS...: sbatch with the run's job options (partition, gpus, time, ...); a launch
# with options defines its own after this library (engines/slurm.py: sbatch_function).
rgt_sbatch() { sbatch --no-requeue "$@"; }

# rgt_submit DIR JOB SECRETS: write the batch script and submit it. Secrets never enter the
# batch script, sbatch's argv or the job's environment as Slurm records it: they go to a 0600
# file in the run dir that the wrapper reads and deletes when the job starts.
rgt_submit() {
  d=$1
  ( umask 077 && printf '%s' "$3" > "$d/secrets.env" ) || { echo "RGT-SUBMIT-FAILED cannot write $d/secrets.env"; exit 1; }
  # shellcheck disable=SC2016  # $PWD is the job's: the run dir (--chdir), expanded when it starts
  printf '#!/bin/bash\n# remote-gpu-trainer: the run-dir wrapper as the batch shell\nexec bash "$PWD/wrapper.sh" shell "$PWD/secrets.env"\n' > "$d/job.sbatch"
  if ! out=$(rgt_sbatch --parsable --job-name "$2" --output "$d/slurm.out" --open-mode=append --chdir "$d" \
      --signal=B:USR1@60 "$d/job.sbatch" 2>&1); then
    rm -f -- "$d/secrets.env"
    printf 'RGT-SUBMIT-FAILED sbatch: %s\n' "$(printf %s "$out" | tr '\n' ' ')"; exit 1
  fi
  printf '%s\n' "${out%%;*}" > "$d/slurm_job_id"
}

# rgt_slurm_wait ID TENTHS: wait up to TENTHS tenths of a second while the job is still queued
# or running (squeue forgets it once it has left COMPLETING).
rgt_slurm_wait() { i=0
  while [ "$i" -lt "$2" ] && [ -n "$(squeue -h -o %T -j "$1" 2>/dev/null)" ]; do sleep 0.1; i=$((i+1)); done; }

# rgt_cancel DIR JOB FIRST TENTHS: FIRST (e.g. USR1) then TERM to every process of the job
# (--full: the batch shell too), each followed by up to TENTHS of grace, then plain scancel.
rgt_cancel() {
  id=$(cat "$1/slurm_job_id" 2>/dev/null); [ -n "$id" ] || return 0
  if [ -n "$3" ]; then scancel --signal="$3" --full "$id" 2>/dev/null; rgt_slurm_wait "$id" "$4"; fi
  scancel --signal=TERM --full "$id" 2>/dev/null; rgt_slurm_wait "$id" "$4"
  scancel "$id" 2>/dev/null; rgt_slurm_wait "$id" 300
  return 0
}
