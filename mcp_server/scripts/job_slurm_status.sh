#!/bin/sh
# The Slurm engine's state of each run dir given as an argument, in one round trip and without a
# process per run: one squeue for every live job; for the jobs it no longer lists (squeue forgets
# a job MinJobAge after it ends) one sacct, or, when the cluster keeps no accounting, one sacct -c
# over the job completion log; `scontrol show job -o` only for a job neither answered; one stat
# for every log; one awk to join them. rgt_state only for a run whose wrapper recorded its end.
# $1 ask Slurm: 1, or 0 to read the run dirs only (the server asked Slurm moments ago; sites
# punish frequent polling)  $2... run dirs.
# One line per run dir, fields separated by <US>:
#   run-dir state line ("|"-separated), job id, 1 when --requeue was asked (the run dir's
#   `requeue` file; 2 when, besides, the last attempt was stopped by a signal: Slurm may run the
#   job again, so that end is not the run's), the source that answered (squeue, sacct, jobcomp,
#   scontrol, "" when none knew the job, or "unanswered" when squeue failed: then REASON is its error),
#   "STATE|REASON|EXITCODE" as it said them, 1 when the job has started (the wrapper's pid file)
# Job ids are only ever digits (array tasks: 12_3), never shell text. Needs job_state.sh.
ask=$1
shift
TAB=$(printf '\t')
NL='
'
ids="" jobs=""
for d in "$@"; do
  id="" raw=""
  if [ -r "$d/slurm_job_id" ]; then read -r id < "$d/slurm_job_id"; fi
  if [ -r "$d/slurm_raw_id" ]; then read -r raw < "$d/slurm_raw_id"; fi
  case "$id" in *[!0-9_]*|_*) id="";; esac
  case "$raw" in *[!0-9]*) raw="";; esac
  [ -n "$id" ] && ids="$ids${ids:+,}$id"
  jobs="$jobs$d$TAB$id$TAB${raw:-$id}$NL"
done
[ "$ask" = 1 ] || ids=""
# squeue failing is an answer only when it says the ids are unknown (all purged); any other failure
# (the controller busy or down: "Socket timed out") means Slurm did not answer, and a job nobody
# answered for is then neither lost nor ended: `down` carries squeue's words to the engine.
live="" down=""
if [ -n "$ids" ] && ! live=$(squeue -r -h -o '%i|%T|%r' -j "$ids" 2>&1); then
  case "$live" in *"Invalid job id"*) ;; *) down=$(printf '%s' "${live:-squeue failed}" | tr -s '\n\t|\037' '    ' | cut -c 1-200);; esac
  live=""
fi
# The ids squeue did not list, as accounting knows them (an array task by its raw id once it started).
ended=$(printf '%s\n@R\n%s' "$live" "$jobs" | awk -F '\t' '
  $0 == "@R" { part = 1; next }
  !part { split($0, f, "|"); q[f[1]] = 1; next }
  $2 != "" && !($2 in q) { printf "%s%s", sep, $3; sep = "," }')
acct="" src=""
if [ -n "$ended" ] && [ "$ask" = 1 ]; then
  fields=JobIDRaw,JobID,State,Reason,ExitCode
  if acct=$(sacct -X -j "$ended" --parsable2 --noheader -o "$fields" 2>/dev/null); then src=sacct
  elif acct=$(sacct -c -X -j "$ended" --parsable2 --noheader -o "$fields" 2>/dev/null); then src=jobcomp
  else acct=""; fi
fi
# The run dirs are read after Slurm answered: a job it says ended has written its exit file by then
# (the wrapper writes it before the job ends), however long squeue took.
runs=$(printf '%s' "$jobs" | while IFS="$TAB" read -r d id raw; do
  own=""
  if [ -f "$d/exit_code" ] || [ -f "$d/cancelled" ]; then own=$(rgt_state "$d" | tr '\t' '|'); fi
  rq=0
  if [ -f "$d/requeue" ]; then rq=1; [ -f "$d/signalled" ] && rq=2; fi
  go=0; [ -f "$d/pid" ] && go=1
  printf '%s\n' "$d$TAB$id$TAB$raw$TAB$rq$TAB$own$TAB$go"
done)
{
  echo @Q; [ -n "$live" ] && printf '%s\n' "$live"
  echo @A; [ -n "$acct" ] && printf '%s\n' "$acct"
  echo @S; for d in "$@"; do printf '%s\n' "$d/log"; done | xargs -d '\n' stat -c "%n$TAB%s|%Y" 2>/dev/null
  echo @R; [ -n "$runs" ] && printf '%s\n' "$runs"
} | awk -F '\t' -v us="$(printf '\037')" -v src="$src" -v ask="$ask" -v down="$down" '
  /^@[QASR]$/ { part = $0; next }
  part == "@Q" { split($0, f, "|"); q[f[1]] = f[2] "|" f[3] "|"; next }
  part == "@A" { split($0, f, "|"); a[f[1]] = a[f[2]] = f[3] "|" f[4] "|" f[5]; next }
  part == "@S" { s[$1] = $2; next }
  part == "@R" {
    d = $1; id = $2; raw = $3; own = $5; from = ""; said = ""
    if (own == "") own = "gone|-|-|" ((d "/log") in s ? s[d "/log"] : "-|-")
    if (id != "" && (id in q)) { from = "squeue"; said = q[id] }
    else if (raw != "" && (raw in a)) { from = src; said = a[raw] }
    else if (id != "" && (id in a)) { from = src; said = a[id] }
    else if (id != "" && down != "") { from = "unanswered"; said = "|" down "|" }
    else if (id != "" && ask == 1) {
      cmd = "scontrol show job -o " raw " 2>/dev/null"; st = ""; why = ""; ec = ""
      while ((cmd | getline line) > 0) {
        n = split(line, w, " ")
        for (i = 1; i <= n; i++) {
          if (w[i] ~ /^JobState=/) st = substr(w[i], 10)
          else if (w[i] ~ /^Reason=/) why = substr(w[i], 8)
          else if (w[i] ~ /^ExitCode=/) ec = substr(w[i], 10)
        }
      }
      close(cmd)
      if (st != "") { from = "scontrol"; said = st "|" why "|" ec }
    }
    printf "%s%s%s%s%s%s%s%s%s%s%s\n", own, us, id, us, $4, us, from, us, said, us, $6
  }'
