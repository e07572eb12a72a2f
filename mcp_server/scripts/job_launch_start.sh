#!/bin/sh
# Launch round trip 2: under the name's lock (mkdir is atomic), return the name's live run or
# create the run dir, submit it to the engine, and probe it for an early exit.
# Needs job_state.sh, job_run_files.sh, job_launch_lib.sh and an engine library (rgt_submit).
# Secrets on stdin.
# $1 base (the absolute .rgt dir)  $2 run id  $3 run name or ""  $4 relaunch a finished name: 0|1
# $5 probe ticks of 0.2 s  $6 log tail bytes  $7 the engine's name for the job
# $8 fill in the workdir's git state: 0|1  $9 the facts are remembered, not just read: 0|1
# $10 $11 the durable root and the workdir as asked  $12 $13 the disk gate: KiB and inodes free
# $14 workdir (physical)  $15 where the command starts: the workdir, or (a push_code snapshot)
# the run dir's work/, made here with the snapshot's entries linked in
# $16.. run.json, cmd.sh, env.sh, wrapper.sh, sync_spec, on_exit.sh contents ("": none)
set -u
base=$1 run_id=$2 name=$3 relaunch=$4 ticks=$5 tail_bytes=$6 job=$7 fill_git=$8 assumed=$9
root=${10} asked_wd=${11} min_kib=${12} min_inodes=${13} wd=${14} cwd=${15} record=${16}
shift 16
# Remembered facts hold while the durable root and the workdir resolve to the paths they did;
# else they are read again (launch_facts.py), before anything is written.
if [ "$assumed" = 1 ]; then
  rgt_real "$root/.rgt"; [ "$REAL" = "$base" ] || { echo RGT-FACTS-CHANGED; exit 0; }
  rgt_real "$asked_wd"; [ "$REAL" = "$wd" ] || { echo RGT-FACTS-CHANGED; exit 0; }
fi
rgt_disk "$base"
case "$AVAIL_KIB${INODES:-0}${IFREE:-0}" in *[!0-9]*|'') ;; *)
  if [ "$AVAIL_KIB" -lt "$min_kib" ] || { [ "${INODES:-0}" -gt 0 ] && [ "${IFREE:-0}" -lt "$min_inodes" ]; }; then
    echo RGT-DISK-GATE; exit 0; fi;; esac
# The code's state as the run starts: the record arrives open at its git fields, which the box
# appends (JSON tokens) with the closing brace.
if [ "$fill_git" = 1 ]; then rgt_git "$wd"
  case "$GIT_COMMIT" in ''|*[!0-9a-f]*) commit=null;; *) commit="\"$GIT_COMMIT\"";; esac
  case "$GIT_DIRTY" in 1) dirty=true;; 0) dirty=false;; *) dirty=null;; esac
  printf 'git_commit=%s\ngit_dirty=%s\n' "$commit" "$dirty"
  record="$record$commit,
  \"git_dirty\": $dirty
}
"
fi
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
rgt_make_run "$d" "$cwd" "$record" "$@"
# A sealed snapshot is never written: the run works in its own dir, the code linked in. A dir
# that cannot be made whole is removed with the run, and nothing starts.
if [ "$cwd" != "$wd" ] && ! rgt_code_links "$wd" "$cwd" 2>/dev/null; then
  rm -rf -- "$d"; echo "RGT-WRITE-FAILED $cwd"; exit 1
fi
# The secrets as NAME=base64 lines, read by the shell itself (no process for an empty stdin).
RGT_SECRETS=; while IFS= read -r line || [ -n "$line" ]; do RGT_SECRETS="${RGT_SECRETS:+$RGT_SECRETS
}$line"; done
rgt_submit "$d" "$job" "$RGT_SECRETS"
unset RGT_SECRETS
if [ -n "$name" ]; then printf '%s\n' "$run_id" > "$name_file.tmp" && mv -f "$name_file.tmp" "$name_file"; fi
echo "RGT-STARTED $run_id"
# The wrapper records its pid within a moment; then wait for an early exit. An engine whose job
# starts later, elsewhere (a Slurm queue), sets RGT_PID_WAIT=0 in its library: nothing to probe here.
# Polled every 5 ms for up to 3 s: a wrapper records its pid within a few milliseconds.
[ "${RGT_PID_WAIT:-600}" = 0 ] && exit 0
i=0; while [ ! -f "$d/pid" ] && [ ! -f "$d/exit_code" ] && [ $i -lt "${RGT_PID_WAIT:-600}" ]; do sleep 0.005; i=$((i+1)); done
i=0; while [ ! -f "$d/exit_code" ] && [ $i -lt "$ticks" ]; do sleep 0.2; i=$((i+1)); done
printf 'state=%s\n' "$(rgt_state "$d")"
echo RGT-LOG; tail -c "$tail_bytes" "$d/log" 2>/dev/null
