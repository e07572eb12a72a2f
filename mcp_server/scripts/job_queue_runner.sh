#!/usr/bin/env bash
# remote-gpu-trainer queue runner: the queue launch writes this (after job_state.sh) into the
# queue dir as queue.sh; never edit it while it runs. Run as `bash <queue dir>/queue.sh K`,
# secrets on stdin: starts the wrappers of the run ids in `children`, in order, K at a time.
set -u
qd=${0%/*}; runs=$(dirname "$qd"); k=$1
cd -- "$qd" || exit 96
RGT_SECRETS=$(cat); exec </dev/null
printf '%s\n' "$$" > pid.tmp && mv -f pid.tmp pid
# The disk floor of the launch (KiB and inodes free on the durable root), checked before EACH cell.
read -r min_kib min_inodes < disk_floor 2>/dev/null || { min_kib=0; min_inodes=0; }
short() { why=""; kib=$(df -P -k -- "$runs" 2>/dev/null | awk 'NR==2 {print $4}')
  read -r itotal ifree < <(df -P -i -- "$runs" 2>/dev/null | awk 'NR==2 {print $2, $4}')
  [ -n "$kib" ] && [ "$kib" -lt "$min_kib" ] && why="$((kib / 1024)) MiB free < floor $((min_kib / 1024)) MiB"
  [ "${itotal:-0}" -gt 0 ] && [ "${ifree:-0}" -lt "$min_inodes" ] && why="${why:+$why; }$ifree inodes free < floor $min_inodes"
  printf '%s' "$why"; }
# hold CELL: while the disk is below the floor the cell waits, its `held` file saying why.
hold() { why=$(short); [ -n "$why" ] || return 0
  printf '%s\n' "$why" > "$runs/$1/held.tmp" && mv -f "$runs/$1/held.tmp" "$runs/$1/held"
  printf '# rgt: held before starting: the disk is below the floor (%s); starts once space is freed\n' "$why" >> "$runs/$1/log"
  while [ -n "$(short)" ] && [ ! -f "$runs/$1/cancelled" ]; do sleep 2; done
  rm -f -- "$runs/$1/held"; }
live() { n=0; while IFS= read -r c; do
  [ -f "$runs/$c/exit_code" ] && continue
  rgt_alive "$runs/$c" "$(cat "$runs/$c/pid" 2>/dev/null)" "$runs/$c/wrapper.sh" && n=$((n+1))
  done < children; echo "$n"; }
while IFS= read -r c <&4; do
  while [ "$(live)" -ge "$k" ]; do sleep 1; done
  # A cell cancelled while it waited (cancel_run wrote `cancelled`) is never started.
  [ -f "$runs/$c/cancelled" ] && { rm -f -- "$runs/$c/queued"; continue; }
  hold "$c"
  [ -f "$runs/$c/cancelled" ] && { rm -f -- "$runs/$c/queued"; continue; }
  printf '%s' "$RGT_SECRETS" | setsid -f bash "$runs/$c/wrapper.sh" shell >/dev/null 2>&1
  # The cell reads queued until its wrapper records a pid: on a loaded box that can take seconds,
  # and a cell that is starting must never read lost. A wrapper that never does within 60 s is.
  i=0; while [ ! -f "$runs/$c/pid" ] && [ ! -f "$runs/$c/exit_code" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
  rm -f -- "$runs/$c/queued"
done 4< children
unset RGT_SECRETS
while [ "$(live)" -gt 0 ]; do sleep 2; done
printf '0\n' > exit_code.tmp && mv -f exit_code.tmp exit_code
