#!/bin/sh
# The Slurm engine's state of each run dir given as an argument, in one round trip and without a
# process per run: one squeue for every live job, one stat for every log, one awk to join them;
# rgt_state only for a run whose wrapper recorded its end, `scontrol show job -o` only for a job
# squeue no longer lists (Slurm keeps finished jobs for MinJobAge). One line per run dir:
#   run-dir state line ("|"-separated) <US> job id <US> squeue "STATE|REASON" <US> scontrol's
#   JobState, Reason and ExitCode
# Needs job_state.sh.
TAB=$(printf '\t')
NL='
'
ids="" runs=""
for d in "$@"; do
  id=""; if [ -r "$d/slurm_job_id" ]; then read -r id < "$d/slurm_job_id"; fi
  [ -n "$id" ] && ids="$ids${ids:+,}$id"
  own=""
  if [ -f "$d/exit_code" ] || [ -f "$d/cancelled" ]; then own=$(rgt_state "$d" | tr '\t' '|'); fi
  runs="$runs$d$TAB$id$TAB$own$NL"
done
{
  echo @Q; [ -n "$ids" ] && squeue -h -o '%i|%T|%r' -j "$ids" 2>/dev/null
  echo @S; for d in "$@"; do printf '%s\n' "$d/log"; done | xargs -d '\n' stat -c "%n$TAB%s|%Y" 2>/dev/null
  echo @R; printf '%s' "$runs"
} | awk -F '\t' -v us="$(printf '\037')" '
  /^@[QSR]$/ { part = $0; next }
  part == "@Q" { split($0, f, "|"); q[f[1]] = f[2] "|" f[3]; next }
  part == "@S" { s[$1] = $2; next }
  part == "@R" {
    d = $1; id = $2; own = $3; st = ""; sc = ""
    if (own == "") own = "gone|-|-|" ((d "/log") in s ? s[d "/log"] : "-|-")
    if (id != "" && (id in q)) st = q[id]
    else if (id ~ /^[0-9][0-9_]*$/) {  # a job id: digits (array tasks: 12_3), never shell text
      cmd = "scontrol show job -o " id " 2>/dev/null"
      while ((cmd | getline line) > 0) {
        n = split(line, w, " ")
        for (i = 1; i <= n; i++) if (w[i] ~ /^(JobState|Reason|ExitCode)=/) sc = sc w[i] " "
      }
      close(cmd)
    }
    printf "%s%s%s%s%s%s%s\n", own, us, id, us, st, us, sc
  }'
