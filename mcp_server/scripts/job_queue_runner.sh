#!/usr/bin/env bash
# remote-gpu-trainer queue runner: the queue launch writes this (after job_state.sh) into the
# queue dir as queue.sh; never edit it while it runs. Run as `bash <queue dir>/queue.sh K`,
# secrets on stdin: starts the wrappers of the run ids in `children`, in order, K at a time.
set -u
qd=${0%/*}; runs=$(dirname "$qd"); k=$1
cd -- "$qd" || exit 96
RGT_SECRETS=$(cat); exec </dev/null
printf '%s\n' "$$" > pid.tmp && mv -f pid.tmp pid
live() { n=0; while IFS= read -r c; do
  [ -f "$runs/$c/exit_code" ] && continue
  rgt_alive "$runs/$c" "$(cat "$runs/$c/pid" 2>/dev/null)" "$runs/$c/wrapper.sh" && n=$((n+1))
  done < children; echo "$n"; }
while IFS= read -r c <&4; do
  while [ "$(live)" -ge "$k" ]; do sleep 1; done
  printf '%s' "$RGT_SECRETS" | setsid -f bash "$runs/$c/wrapper.sh" shell >/dev/null 2>&1
  i=0; while [ ! -f "$runs/$c/pid" ] && [ ! -f "$runs/$c/exit_code" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  rm -f -- "$runs/$c/queued"
done 4< children
unset RGT_SECRETS
while [ "$(live)" -gt 0 ]; do sleep 2; done
printf '0\n' > exit_code.tmp && mv -f exit_code.tmp exit_code
