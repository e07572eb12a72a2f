#!/bin/sh
# Library: the run-dir contract read on the box (prepended to the job_* scripts that need it).
# rgt_state DIR prints one tab-separated line: kind (cancelled|exited|alive|queued|orphaned|gone), exit
# code (cancelled: "-" when the run left none) / pid /
# queue id, ended_at, log size, log mtime ("-" when unknown), and for a run that exited 0 and
# asked for sync_to_durable a sixth field: the sync result ("ok ..." or "failed <reason>");
# status.py's StateLine parses it. An orphaned run (wrapper gone, its command still running: the
# shell sourcing cmd.sh is alive) has the wrapper pid and, sixth, its live processes.
# rgt_oom: the OOM kills counted so far in this shell's cgroup (v2 memory.events, else v1); read
# with the shell's own `read`, since it runs at every launch and each status read.
rgt_oom() { rel=
  while IFS= read -r _rgt_l; do case $_rgt_l in 0::*) rel=${_rgt_l#0::}; break;; esac; done 2>/dev/null < /proc/self/cgroup
  for f in "/sys/fs/cgroup$rel/memory.events" /sys/fs/cgroup/memory.events; do
    [ -f "$f" ] && { rgt_field oom_kill "$f"; return; }; done
  rgt_field oom_kill /sys/fs/cgroup/memory/memory.oom_control; }
# rgt_field KEY FILE: the value of the first "KEY value" line of FILE (nothing when none). Its
# variables are prefixed: a library function shares the caller's names.
rgt_field() { while read -r _rgt_k _rgt_v; do [ "$_rgt_k" = "$1" ] && { printf '%s\n' "$_rgt_v"; return; }
  done 2>/dev/null < "$2"; }
# rgt_read FILE: LINE becomes FILE's first line ("" when it cannot be read), read by the shell
# itself: status reads run for every run on every poll, and a process per file adds up.
rgt_read() { LINE=; { IFS= read -r LINE || :; } 2>/dev/null < "$1"; }
# rgt_alive DIR PID WRAPPER: the run's wrapper process is alive (same boot, not a zombie, and its
# command line names WRAPPER: a reused pid is not the run).
rgt_alive() { pid=$2; case $pid in ''|*[!0-9]*) return 1;; esac
  rgt_read /proc/sys/kernel/random/boot_id; _rgt_boot=$LINE; rgt_read "$1/boot_id"
  [ "$_rgt_boot" = "$LINE" ] || return 1
  if [ -r /proc/self/stat ]; then rgt_read "/proc/$pid/stat"; [ -n "$LINE" ] || return 1
    case ${LINE##*) } in Z*|X*) return 1;; esac
  else st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "${st#Z}" = "$st" ] || return 1; fi
  grep -qF -- "$3" "/proc/$pid/cmdline" 2>/dev/null; }
# rgt_orphans DIR: "pid command, ..." of the run's processes still alive after its wrapper died
# (same boot; the shell that sources cmd.sh names it in its arguments); empty when none.
rgt_orphans() { [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" = "$(cat "$1/boot_id" 2>/dev/null)" ] || return 0
  g=$(ps -ww -eo pid=,stat=,args= 2>/dev/null | awk -v p="/${1##*/}/cmd.sh" '$2 !~ /^Z/ && index($0, p) { print $1 }')
  [ -n "$g" ] || return 0
  ps -ww -eo pid=,pgid=,stat=,comm= 2>/dev/null | awk -v g="$(cat "$1/pid" 2>/dev/null)" -v s="$g" '
    BEGIN { n = split(s, a, "\n"); for (i = 1; i <= n; i++) seed[a[i]] = 1 }
    $3 !~ /^Z/ && ($2 == g || ($1 in seed)) { printf "%s%s %s", sep, $1, $4; sep = ", " }'; }
rgt_state() { d=$1
  if _rgt_st=$(stat -c '%s %Y' "$d/log" 2>/dev/null); then lsz=${_rgt_st% *} lmt=${_rgt_st#* }; else lsz=- lmt=-; fi
  rgt_read "$d/pid"; pid=$LINE
  if [ -f "$d/cancelled" ] && ! rgt_alive "$d" "$pid" "$d/wrapper.sh" && [ -z "$(rgt_orphans "$d")" ]; then
    printf 'cancelled\t%s\t%s\t%s\t%s\n' "$(cat "$d/exit_code" 2>/dev/null || echo -)" \
      "$(stat -c %Y "$d/cancelled" 2>/dev/null || echo -)" "$lsz" "$lmt"; return; fi
  if [ -f "$d/exit_code" ]; then rgt_read "$d/exit_code"; ec=$LINE; rgt_read "$d/ended_at"
    printf 'exited\t%s\t%s\t%s\t%s' "$ec" "${LINE:--}" "$lsz" "$lmt"
    if [ "$ec" = 0 ] && [ -f "$d/sync_spec" ]; then printf '\t%s\n' "$(rgt_sync_state "$d")"; else echo; fi; return; fi
  if rgt_alive "$d" "$pid" "$d/wrapper.sh"; then printf 'alive\t%s\t-\t%s\t%s\n' "$pid" "$lsz" "$lmt"; return; fi
  if [ -z "$pid" ] && [ -f "$d/queued" ]; then
    q=$(cat "$d/queued"); qd=$(dirname "$d")/$q
    if rgt_alive "$qd" "$(cat "$qd/pid" 2>/dev/null)" "$qd/queue.sh"; then printf 'queued\t%s\t-\t%s\t%s' "$q" "$lsz" "$lmt"
      if [ -f "$d/held" ]; then printf '\theld %s\n' "$(head -c 500 "$d/held" | tr '\t\r\n' '   ')"; else echo; fi; return; fi
  fi
  o=$(rgt_orphans "$d")
  if [ -n "$o" ]; then printf 'orphaned\t%s\t-\t%s\t%s\t%s\n' "${pid:--}" "$lsz" "$lmt" "$(printf %s "$o" | tr '\t' ' ')"; return; fi
  printf 'gone\t%s\t-\t%s\t%s\n' "${pid:--}" "$lsz" "$lmt"; }
# rgt_sync_state DIR: the sync result of a run that exited 0 and asked for sync_to_durable; never
# empty, and anything but a recorded "ok" reads as a failure.
rgt_sync_state() { sy=$(head -n 1 "$1/sync_status" 2>/dev/null | head -c 2000 | tr '\t\r' '  ')
  if [ ! -f "$1/sync_status" ]; then sy="failed no sync_status was recorded although sync_to_durable was asked"
  elif [ -z "$sy" ]; then sy="failed sync_status is empty"; fi
  printf '%s\n' "$sy"; }
rgt_lost_facts() { d=$1
  printf 'boot_then=%s\nboot_now=%s\n' "$(cat "$d/boot_id" 2>/dev/null)" "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
  printf 'oom_then=%s\noom_now=%s\n' "$(cat "$d/oom_base" 2>/dev/null)" "$(rgt_oom)"
  printf 'uptime=%s\nnow=%s\n' "$(cut -d' ' -f1 /proc/uptime)" "$(date +%s)"
  printf 'started=%s\n' "$(stat -c %Y "$d/pid" 2>/dev/null || stat -c %Y "$d/run.json" 2>/dev/null)"
  pid=$(cat "$d/pid" 2>/dev/null)
  [ -n "$pid" ] && dmesg 2>/dev/null | grep -E "Killed process ${pid}[^0-9]|oom-kill.*pid=${pid}[^0-9]" | tail -n 3 | sed 's/^/dmesg=/'
  return 0; }
# rgt_kill_group DIR [FIRST] [TENTHS]: signal FIRST (e.g. USR1, so the job checkpoints; none
# when empty), then TERM, to the process group of the wrapper whose pid DIR records, each
# followed by up to TENTHS tenths of a second of grace (default 50), then KILL. The wrapper is
# a session leader, so its pid is the group id.
rgt_kill_group() { pid=$(cat "$1/pid" 2>/dev/null); g=${3:-50}
  if [ -n "$pid" ]; then
    for s in ${2:+"$2"} TERM; do kill -s "$s" -- "-$pid" 2>/dev/null
      i=0; while kill -0 -- "-$pid" 2>/dev/null && [ $i -lt "$g" ]; do sleep 0.1; i=$((i+1)); done; done
    kill -KILL -- "-$pid" 2>/dev/null; fi; return 0; }
