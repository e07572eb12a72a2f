#!/bin/sh
# Launch round trip 2: under the name's lock (mkdir is atomic), return the name's live run or
# create the run dir, submit it to the engine, and probe it for an early exit.
# Needs job_state.sh, job_run_files.sh and an engine library (rgt_submit). Secrets on stdin.
# $1 base (the absolute .rgt dir)  $2 run id  $3 run name or ""  $4 relaunch a finished name: 0|1
# $5 probe ticks of 0.2 s  $6 log tail bytes  $7 the engine's name for the job
# $8 workdir  $9.. run.json, cmd.sh, env.sh, wrapper.sh, sync_spec, on_exit.sh contents ("": none)
set -u
base=$1 run_id=$2 name=$3 relaunch=$4 ticks=$5 tail_bytes=$6 job=$7
shift 7
if [ -n "$name" ]; then
  lock="$base/locks/$name" name_file="$base/names/$name"
  n=0; until mkdir "$lock" 2>/dev/null; do n=$((n+1)); [ $n -gt 100 ] && { echo RGT-LOCKED; exit 0; }; sleep 0.1; done
  trap 'rmdir "$lock" 2>/dev/null' EXIT
  if [ -f "$name_file" ]; then rid=$(cat "$name_file"); st=$(rgt_state "$base/runs/$rid"); case "$st" in
    alive*|queued*) printf 'RGT-EXISTING %s\nstate=%s\n' "$rid" "$st"; exit 0;;
    *) [ "$relaunch" = 1 ] || { printf 'RGT-FINISHED %s\nstate=%s\n' "$rid" "$st"; exit 0; };;
  esac; fi
fi
d="$base/runs/$run_id"
rgt_make_run "$d" "$@"
# The secrets as NAME=base64 lines, read by the shell itself (no process for an empty stdin).
RGT_SECRETS=; while IFS= read -r line || [ -n "$line" ]; do RGT_SECRETS="${RGT_SECRETS:+$RGT_SECRETS
}$line"; done
rgt_submit "$d" "$job" "$RGT_SECRETS"
unset RGT_SECRETS
if [ -n "$name" ]; then printf '%s\n' "$run_id" > "$name_file.tmp" && mv -f "$name_file.tmp" "$name_file"; fi
echo "RGT-STARTED $run_id"
# The wrapper records its pid within a moment; then wait for an early exit. An engine whose job
# starts later, elsewhere (a Slurm queue), sets RGT_PID_WAIT=0 in its library: nothing to probe here.
[ "${RGT_PID_WAIT:-150}" = 0 ] && exit 0
i=0; while [ ! -f "$d/pid" ] && [ ! -f "$d/exit_code" ] && [ $i -lt "${RGT_PID_WAIT:-150}" ]; do sleep 0.02; i=$((i+1)); done
i=0; while [ ! -f "$d/exit_code" ] && [ $i -lt "$ticks" ]; do sleep 0.2; i=$((i+1)); done
printf 'state=%s\n' "$(rgt_state "$d")"
echo RGT-LOG; tail -c "$tail_bytes" "$d/log" 2>/dev/null
