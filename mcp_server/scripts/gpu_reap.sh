#!/bin/sh
# Zombie VRAM holders: processes that hold a /dev/nvidia* node open while nvidia-smi lists no
# compute process for them (a crashed job's orphaned dataloader workers, a killed notebook's
# kernel). `plan` reads; `kill` stops exactly the processes planned, each only while its start
# time is still the one planned (a pid the kernel gave to another process is never signalled).
# $1 plan | kill   then for kill: PID:STARTTIME ...
# plan prints: boot=<boot id>, self=<this script's process chain>, listed=<nvidia-smi's compute
# pids>, hidden=1 when nvidia-smi cannot show pids here, invisible=<listed pids with no /proc
# entry here: another container's>, then one line per holder:
#   holder=<pid> <TAB> start time (clock ticks after boot) <TAB> age s <TAB> user <TAB> command
#   <TAB> ancestors (pids, nearest first) <TAB> 1 when an ancestor is a run this server launched
# kill prints per pid: reaped=<pid> <TAB> TERM|KILL|gone|reused
mode=$1
shift
# start time: field 22 of /proc/PID/stat, counted after the ")" that ends the command name
start_of() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
# same PID START: the process is still the planned one and has not exited (a zombie entry, waiting
# for its parent to read its status, holds nothing any more).
same() { set -- "$1" "$2" "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,20)"
  [ "$3" = "${3#Z }" ] && [ "${3#* }" = "$2" ]; }
parent_of() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }
chain() { p=$(parent_of "$1"); n=0
  while [ -n "$p" ] && [ "$p" -gt 1 ] && [ "$n" -lt 64 ]; do printf '%s ' "$p"; p=$(parent_of "$p"); n=$((n + 1)); done; }
if [ "$mode" = kill ]; then
  for spec in "$@"; do
    pid=${spec%%:*} want=${spec#*:}
    case "$pid$want" in *[!0-9]*|'') continue;; esac
    if [ ! -d "/proc/$pid" ]; then printf 'reaped=%s\tgone\n' "$pid"; continue; fi
    [ "$(start_of "$pid")" = "$want" ] || { printf 'reaped=%s\treused\n' "$pid"; continue; }
    same "$pid" "$want" || { printf 'reaped=%s\tgone\n' "$pid"; continue; }
    kill -TERM "$pid" 2>/dev/null
    i=0; while [ "$i" -lt 50 ] && same "$pid" "$want"; do sleep 0.1; i=$((i + 1)); done
    if same "$pid" "$want"; then kill -KILL "$pid" 2>/dev/null; printf 'reaped=%s\tKILL\n' "$pid"
    else printf 'reaped=%s\tTERM\n' "$pid"; fi
  done
  exit 0
fi
printf 'boot=%s\n' "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
printf 'self=%s %s\n' "$$" "$(chain "$$")"
apps=""
if command -v nvidia-smi >/dev/null 2>&1; then
  apps=$(timeout 20 nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits 2>/dev/null)
fi
listed=$(printf '%s\n' "$apps" | cut -d, -f1 | tr -d ' ' | grep -E '^[0-9]+$' | tr '\n' ' ')
printf 'listed=%s\n' "$listed"
printf '%s\n' "$apps" | grep -qiE 'not supported|N/A' && echo hidden=1
for p in $listed; do [ -d "/proc/$p" ] || printf 'invisible=%s\n' "$p"; done
devs=$(ls -d /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm 2>/dev/null)
[ -n "$devs" ] || exit 0
if command -v fuser >/dev/null 2>&1; then pids=$(printf '%s\n' "$devs" | xargs fuser 2>/dev/null)
elif command -v lsof >/dev/null 2>&1; then pids=$(printf '%s\n' "$devs" | xargs lsof -t 2>/dev/null)
else echo 'error=neither fuser nor lsof is installed'; exit 3; fi
# shellcheck disable=SC2086  # $pids: fuser's pids, split on purpose
for pid in $(printf '%s\n' $pids | grep -E '^[0-9]+$' | sort -un); do
  st=$(start_of "$pid"); [ -n "$st" ] || continue
  anc=$(chain "$pid"); ours=0
  for a in $anc; do tr '\0' ' ' < "/proc/$a/cmdline" 2>/dev/null | grep -q '/\.rgt/runs/' && ours=1; done
  printf 'holder=%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pid" "$st" "$(ps -o etimes= -p "$pid" | tr -d ' ')" \
    "$(ps -o user= -p "$pid" | tr -d ' ')" "$(ps -o comm= -p "$pid")" "$anc" "$ours"
done
