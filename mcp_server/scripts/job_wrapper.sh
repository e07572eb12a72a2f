#!/usr/bin/env bash
# remote-gpu-trainer wrapper: the launch writes this file into each run dir as wrapper.sh; never
# edit it while the run is live. Run as `bash <run dir>/wrapper.sh MODE [SECRET_FIFO]` by the
# engine (MODE shell or tmux): it reads secrets from stdin or the one-shot fifo, records its
# pid, runs cmd.sh in the workdir named by the run dir's `workdir` file, and on exit writes
# exit_code and ended_at atomically (tmp + rename). When the command exits 0 and the run dir
# has a sync_spec, the declared outputs are copied to the durable root first (job_sync.sh,
# prepended to this file) and sync_status is written before exit_code: a reader never sees
# the exit code of a run whose copy is still under way. A failed copy keeps exit_code 0 (the
# command's own code) and the wrapper itself exits 99.
set -u
d=${0%/*}
mode=${1:-shell}
secret_src=${2:-}
cd -- "$d" || exit 96
if [ -n "$secret_src" ]; then exec 3<"$secret_src"; else exec 3<&0; fi
# Split each NAME=base64 line by hand: `IFS='=' read k v` drops a single trailing '=' (bash), the
# padding of every value whose length is 2 mod 3, and the value would decode short.
while IFS= read -r line <&3 || [ -n "${line:-}" ]; do
  k=${line%%=*} v=${line#*=}
  line=
  case "$k" in ''|*[!A-Za-z0-9_]*) continue ;; esac
  export "$k=$(printf '%s' "$v" | base64 -d)"
done
exec 3<&- </dev/null
[ -n "$secret_src" ] && rm -f -- "$secret_src"
# A run whose pid cannot be recorded (a disk that filled since the launch) would run unseen and
# read lost: it does not start.
printf '%s\n' "$$" > "$d/pid.tmp" && mv -f "$d/pid.tmp" "$d/pid" || exit 97
export RGT_RUN_ID="${d##*/}" RGT_RUN_DIR="$d"
finish() {
  printf '%s\n' "$1" > "$d/exit_code.tmp" && mv -f "$d/exit_code.tmp" "$d/exit_code"
  date +%s > "$d/ended_at.tmp" && mv -f "$d/ended_at.tmp" "$d/ended_at"
}
# on_exit STATE CODE: the launch's on_exit.sh (if any), after the result is recorded, with the
# run's state in the environment (secrets stay in the environment, never in argv), at most 60 s,
# output to on_exit.log. Its failure never changes the recorded result or the wrapper's exit code.
on_exit() { [ -f "$d/on_exit.sh" ] || return 0
  ( export RGT_STATE="$1" RGT_EXIT_CODE="$2" RGT_LOG="$d/log" RGT_HOST
    RGT_HOST=$(hostname); RGT_ENDED_AT=$(cat "$d/ended_at" 2>/dev/null); export RGT_ENDED_AT
    cd -- "$(cat "$d/workdir")" 2>/dev/null || cd -- "$d" || exit 96
    timeout 60 bash "$d/on_exit.sh" ) < /dev/null > "$d/on_exit.log" 2>&1
  printf '# rgt: on_exit exited %s\n' "$?" >> "$d/on_exit.log"; return 0; }
# The log may hold what the job prints about its data and paths: owner and group only.
: >> "$d/log" && chmod 640 "$d/log" 2>/dev/null
printf '# rgt: run %s started %s on %s (command in cmd.sh)\n' "${d##*/}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(hostname)" >> "$d/log"
# The box's own settings from prepare_box (caches on the durable tier, mirrors), then the run's.
# shellcheck source=/dev/null
if [ -f "$d/../../box.env" ]; then . "$d/../../box.env" >> "$d/log" 2>&1; fi
# shellcheck source=/dev/null
. "$d/env.sh" >> "$d/log" 2>&1 || { echo "# rgt: env.sh failed" >> "$d/log"; finish 97; exit 97; }
# The workdir is read where it is used: env.sh may export any name, and the job keeps its values.
cd -- "$(cat "$d/workdir")" 2>> "$d/log" || { echo "# rgt: workdir is missing: $(cat "$d/workdir")" >> "$d/log"; finish 98; exit 98; }
# cancel_run may send USR1/USR2 to the whole group first (so the job checkpoints): the wrapper,
# the shell running cmd.sh and tee survive it; the job itself gets the signal with its default
# action or its own handler (a trap is reset for the programs a shell starts).
trap ':' USR1 USR2
# A TERM, HUP or INT from outside (a platform stop, a preemption, kill) must not take the wrapper
# down before the command: it waits for it, records its exit code (143 after TERM) and the signal.
rgt_sig=
trap 'rgt_sig=TERM' TERM; trap 'rgt_sig=HUP' HUP; trap 'rgt_sig=INT' INT
# shellcheck disable=SC2016  # the inner shell expands $0: cmd.sh's path, as `bash cmd.sh` sets it
run_cmd='trap ":" USR1 USR2; . "$0"'
if [ "$mode" = tmux ]; then
  bash -c "$run_cmd" "$d/cmd.sh" 2>&1 | (trap '' USR1 USR2; exec tee -a "$d/log")
  code=${PIPESTATUS[0]}
else
  bash -c "$run_cmd" "$d/cmd.sh" >> "$d/log" 2>&1
  code=$?
fi
if [ -n "$rgt_sig" ]; then
  echo "# rgt: the wrapper received SIG$rgt_sig; the command exited $code" >> "$d/log"
  printf '%s\n' "$rgt_sig" > "$d/signalled"
fi
if [ "$code" = 0 ] && [ -f "$d/sync_spec" ]; then
  { echo "# rgt: command exited 0; copying sync_to_durable outputs"; ( rgt_sync "$d" ) 2>&1
    printf '# rgt: sync_to_durable: %s\n' "$(cat "$d/sync_status" 2>/dev/null)"; } >> "$d/log"
  case $(cat "$d/sync_status" 2>/dev/null) in ok*) ;; *) finish 0; on_exit sync_failed 0; exit 99;; esac
fi
finish "$code"
if [ -f "$d/cancelled" ]; then on_exit cancelled "$code"; elif [ "$code" = 0 ]; then on_exit succeeded 0
else on_exit failed "$code"; fi
exit "$code"
