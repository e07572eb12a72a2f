#!/bin/sh
# The Slurm engine's state of each run dir given as an argument, in one round trip: the run
# dir's own state line (exit file, cancel record), then what Slurm says: squeue for live jobs
# (one call for all of them), `scontrol show job -o` for the ones squeue no longer lists (it
# keeps finished jobs for MinJobAge). One line per run dir, in order:
#   rgt_state line <US> job id <US> squeue "STATE|REASON" <US> scontrol's JobState, Reason and ExitCode
# Needs job_state.sh.
US=$(printf '\037')
ids=""
for d in "$@"; do id=$(cat "$d/slurm_job_id" 2>/dev/null); [ -n "$id" ] && ids="$ids${ids:+,}$id"; done
live=""
[ -n "$ids" ] && live=$(squeue -h -o '%i|%T|%r' -j "$ids" 2>/dev/null)
for d in "$@"; do
  id=$(cat "$d/slurm_job_id" 2>/dev/null)
  q=""; sc=""
  if [ -n "$id" ]; then
    q=$(printf '%s\n' "$live" | awk -F'|' -v id="$id" '$1 == id { print $2 "|" $3; exit }')
    [ -z "$q" ] && sc=$(scontrol show job -o "$id" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|Reason|ExitCode)=' | tr '\n' ' ')
  fi
  printf '%s%s%s%s%s%s%s\n' "$(rgt_state "$d" | tr '\t' '|')" "$US" "$id" "$US" "$q" "$US" "$sc"
done
