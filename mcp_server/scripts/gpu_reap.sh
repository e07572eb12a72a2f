#!/bin/sh
# Zombie VRAM holders: processes that hold a /dev/nvidia* node open while nvidia-smi lists no
# compute process for them (a crashed job's orphaned dataloader workers, a killed notebook's
# kernel). `plan` reads; `kill` stops exactly the processes planned, each only while its start
# time is still the one planned (a pid the kernel gave to another process is never signalled).
# $1 plan SMI_TIMEOUT_S | kill [own|all] PID:STARTTIME ...
# plan prints: boot=<boot id>, self=<this script's process chain>, me=<this user's uid>,
# smi=<nvidia-smi's exit status, or absent>, smi_said=<its first line when it failed> (a driver
# that did not answer lists nothing: no holder may then be called a zombie), listed=<nvidia-smi's
# compute pids>, hidden=1 when nvidia-smi cannot show pids here, invisible=<listed pids with no
# /proc entry here: another container's; the first 50> and invisible_total=<their count>, then
# one line per holder:
#   holder=<pid> <TAB> start time (clock ticks after boot) <TAB> age s <TAB> user <TAB> command
#   <TAB> ancestors (pids, nearest first) <TAB> 1 when an ancestor is a run this server launched
#   <TAB> real uid,effective uid
# kill own (the default) signals only processes whose real and effective uid are this user's.
# kill prints per pid: reaped=<pid> <TAB> TERM|KILL|gone|reused|other-user
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
# real and effective uid, from the Uid: line of /proc/PID/status
uids_of() { sed -n 's/^Uid:[[:space:]]*\([0-9]*\)[[:space:]]*\([0-9]*\).*/\1,\2/p' "/proc/$1/status" 2>/dev/null; }
me=$(id -u)
if [ "$mode" = kill ]; then
  scope=own
  case "$1" in own|all) scope=$1; shift;; esac
  for spec in "$@"; do
    pid=${spec%%:*} want=${spec#*:}
    case "$pid$want" in *[!0-9]*|'') continue;; esac
    if [ ! -d "/proc/$pid" ]; then printf 'reaped=%s\tgone\n' "$pid"; continue; fi
    [ "$(start_of "$pid")" = "$want" ] || { printf 'reaped=%s\treused\n' "$pid"; continue; }
    if [ "$scope" != all ] && [ "$(uids_of "$pid")" != "$me,$me" ]; then
      printf 'reaped=%s\tother-user\n' "$pid"; continue
    fi
    same "$pid" "$want" || { printf 'reaped=%s\tgone\n' "$pid"; continue; }
    kill -TERM "$pid" 2>/dev/null
    i=0; while [ "$i" -lt 50 ] && same "$pid" "$want"; do sleep 0.1; i=$((i + 1)); done
    if same "$pid" "$want"; then kill -KILL "$pid" 2>/dev/null; printf 'reaped=%s\tKILL\n' "$pid"
    else printf 'reaped=%s\tTERM\n' "$pid"; fi
  done
  exit 0
fi
limit=$1
case "$limit" in ''|*[!0-9]*) limit=15;; esac
printf 'boot=%s\n' "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
printf 'self=%s %s\n' "$$" "$(chain "$$")"
printf 'me=%s\n' "$me"
# nvidia-smi's answer goes to a file, not a pipe: a hung nvidia-smi is killed after $limit s,
# and nothing it left behind can hold the reading open.
out=$(mktemp 2>/dev/null || echo "/tmp/rgt-reap.$$")
trap 'rm -f "$out" "$out.pids" "$out.tree"' EXIT
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits > "$out" 2>&1 &
  smi_pid=$!
  # the watchdog takes its sleep with it when it is stopped early
  (trap 'kill "$nap" 2>/dev/null; exit 0' TERM; sleep "$limit" & nap=$!; wait "$nap" && kill -KILL "$smi_pid") \
    >/dev/null 2>&1 &
  watch_pid=$!
  wait "$smi_pid" 2>/dev/null; rc=$?
  kill "$watch_pid" 2>/dev/null
  printf 'smi=%s\n' "$rc"
else
  rc=absent
  echo smi=absent
  : > "$out"
fi
if [ "$rc" != 0 ]; then
  printf 'smi_said=%s\n' "$(grep -m 1 . "$out" | cut -c 1-200)"
  : > "$out"
fi
cut -d, -f1 "$out" | tr -d ' ' | grep -E '^[0-9]+$' | sort -un > "$out.pids"
printf 'listed=%s\n' "$(tr '\n' ' ' < "$out.pids")"
grep -qiE 'not supported|N/A' "$out" && echo hidden=1
# listed pids with no /proc entry here, in one pass (a listing may be long)
printf '%s\n' /proc/[0-9]* | sed 's|^/proc/||' | awk 'NR == FNR { here[$1] = 1; next }
  !($1 in here) { n++; if (n <= 50) print "invisible=" $1 } END { print "invisible_total=" n + 0 }' - "$out.pids"
devs=$(ls -d /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm 2>/dev/null)
[ -n "$devs" ] || exit 0
if command -v fuser >/dev/null 2>&1; then pids=$(printf '%s\n' "$devs" | xargs fuser 2>/dev/null)
elif command -v lsof >/dev/null 2>&1; then pids=$(printf '%s\n' "$devs" | xargs lsof -t 2>/dev/null)
else echo 'error=neither fuser nor lsof is installed'; exit 3; fi
# shellcheck disable=SC2086  # $pids: fuser's pids, split on purpose
held=$(printf '%s\n' $pids | grep -E '^[0-9]+$' | sort -un | tr '\n' ' ')
# Each holder's ancestors (nearest first) and whether one is a run this server launched, from one
# process table for all holders: a box may have hundreds of holders.
{ ps -e -ww -o pid=,args= 2>/dev/null | awk '/\/\.rgt\/runs\// { print "r", $1 }'
  ps -e -o pid=,ppid= 2>/dev/null | sed 's/^/p /'; } | awk -v want="$held" '
  $1 == "r" { run[$2] = 1; next }
  { parent[$2] = $3 }
  END { n = split(want, w, " ")
        for (i = 1; i <= n; i++) { p = w[i]; c = ""; ours = 0; d = 0; q = parent[p]
          while (q > 1 && d < 64) { c = c q " "; if (q in run) ours = 1; q = parent[q]; d++ }
          printf "%s|%s|%s\n", p, c, ours } }' > "$out.tree"
while IFS='|' read -r pid anc ours; do
  st=$(start_of "$pid"); [ -n "$st" ] || continue
  # shellcheck disable=SC2046  # etimes and user: two words, split on purpose
  set -- $(ps -o etimes=,user= -p "$pid")
  printf 'holder=%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pid" "$st" "$1" "$2" "$(ps -o comm= -p "$pid")" "$anc" \
    "$ours" "$(uids_of "$pid")"
done < "$out.tree"
