#!/usr/bin/env bash
# Copied from shared/recipes (the project's tested recipe) for the Slurm engine tests.
# slurm-down.sh - stop the private Slurm started by slurm-up.sh, by the pids it recorded.
# Cancels every job first (slurmstepd and job processes outlive slurmd otherwise),
# then stops slurmd, slurmctld, munged: SIGTERM, wait up to 10 s, then SIGKILL.
# Env: SLURM_TEST_DIR (default /tmp/slurm-test); SLURM_DOWN_PURGE=1 also removes the dir.
set -uo pipefail
D=${SLURM_TEST_DIR:-/tmp/slurm-test}
export SLURM_CONF="$D/slurm.conf"

alive() {  # running and not a zombie (PID 1 here reaps orphans with a delay)
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

stop_pid() {  # name pidfile
  local f="$D/$2" pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then echo "slurm-down: $1 ($pid) ignored SIGTERM, sending SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null; fi
  fi
  rm -f "$f"
  echo "slurm-down: stopped $1 ($pid)" >&2
}

if [ -s "$D/slurmctld.pid.child" ] && alive "$(cat "$D/slurmctld.pid.child")"; then
  jobs=$(squeue -h -o '%i' 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 100); do
      [ -z "$(squeue -h -t PD,R,CG,S -o '%i' 2>/dev/null)" ] && break; sleep 0.1
    done
  fi
  # step daemons of this node still alive (should be none after scancel)
  if [ -s "$D/slurmd.pid.child" ] && alive "$(cat "$D/slurmd.pid.child")"; then
    left=$(scontrol listpids 2>/dev/null | awk 'NR>1 {print $1}' | sort -u)
    [ -n "$left" ] && echo "slurm-down: job pids still present after scancel: $left" >&2
  fi
fi

stop_pid slurmd slurmd.pid.child
stop_pid slurmctld slurmctld.pid.child
stop_pid munged munged.pid.child

if [ "${SLURM_DOWN_PURGE:-0}" = 1 ]; then rm -rf "$D"; fi
exit 0
