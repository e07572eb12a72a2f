#!/usr/bin/env bash
# Copied from shared/recipes (the project's tested recipe) for the Slurm engine tests, extended
# with MaxArraySize and one counted GPU GRES.
# slurm-up.sh - start a private single-node Slurm (munged + slurmctld + slurmd) on
# loopback for tests. Debian bookworm, slurm-wlm 22.05.8, munge 0.5.15, run as root.
# Tested on the project's machine kind (2 cores, no systemd, /usr/sbin/policy-rc.d = exit 101).
#
# Usage:  bash slurm-up.sh            # prints "export SLURM_CONF=..." on success
#         . "$SLURM_TEST_DIR/env.sh"  # then sbatch/squeue/scancel/sacct -c work
# Env:    SLURM_TEST_DIR (default /tmp/slurm-test), SLURMCTLD_PORT (16817),
#         SLURMD_PORT (16818), SLURM_CPUS (nproc), SLURM_UP_TIMEOUT (30 s),
#         SLURM_MAX_ARRAY_SIZE (1001; the tests use 4 so a sweep of 6 is split into two arrays)
# Stop:   bash slurm-down.sh   (stops by the pids this script recorded)
set -euo pipefail

D=${SLURM_TEST_DIR:-/tmp/slurm-test}
CTLD_PORT=${SLURMCTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
CPUS=${SLURM_CPUS:-$(nproc)}
TIMEOUT=${SLURM_UP_TIMEOUT:-30}

# 1. packages (about 10 s with apt's cache warm; policy-rc.d keeps the system units from starting)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurmd slurmctld slurm-client munge >/dev/null
fi

# 2. refuse to start twice on the same dir
for f in "$D/munged.pid.child" "$D/slurmctld.pid.child" "$D/slurmd.pid.child"; do
  if [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
    echo "slurm-up: already running ($f = $(cat "$f")); run slurm-down.sh first" >&2; exit 1
  fi
done

case "$D" in /|/tmp|/tmp/|/root|"") echo "slurm-up: refusing SLURM_TEST_DIR=$D" >&2; exit 1;; esac
rm -rf "$D"
mkdir -p "$D"/{state,spool,log,jobs}
mkdir -p "$D/munge" && chmod 0755 "$D/munge"
chmod 0755 "$D"

# 3. munged with a private key and socket (never touches /etc/munge or /run/munge)
head -c 1024 /dev/urandom > "$D/munge/munge.key"
chmod 0400 "$D/munge/munge.key"
SOCK="$D/munge/munge.socket.2"
# setsid (no fork, since a background job is not a group leader) -> $! is the daemon's own pid
setsid munged -F --force --socket="$SOCK" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --seed-file="$D/munge/munged.seed" \
  --log-file="$D/log/munged.log" >"$D/log/munged.out" 2>&1 </dev/null &
echo $! > "$D/munged.pid.child"

t0=$(date +%s%N)
until munge -S "$SOCK" -n 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; do
  if ! kill -0 "$(cat "$D/munged.pid.child")" 2>/dev/null; then cat "$D/log/munged.out" >&2; exit 1; fi
  if [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge "$TIMEOUT" ]; then echo "slurm-up: munged not ready" >&2; exit 1; fi
  sleep 0.05
done

# 4. slurm.conf: no cgroups, no accounting daemon, job completions to a text file
cat > "$D/slurm.conf" <<EOF
ClusterName=testcluster
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
MaxArraySize=${SLURM_MAX_ARRAY_SIZE:-1001}
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# One counted GPU: a character device stands in for it (Slurm counts it and sets
# CUDA_VISIBLE_DEVICES; task/none constrains nothing), so `--gpus 1` requests schedule and a
# second one waits PENDING (Resources) while the first holds it.
printf 'Name=gpu File=/dev/null\n' > "$D/gres.conf"
export SLURM_CONF="$D/slurm.conf"

# 5. daemons in the foreground (-D), detached from this shell so they outlive it
setsid slurmctld -D -i >"$D/log/slurmctld.out" 2>&1 </dev/null &
echo $! > "$D/slurmctld.pid.child"
setsid slurmd -D -N localhost >"$D/log/slurmd.out" 2>&1 </dev/null &
echo $! > "$D/slurmd.pid.child"

# 6. wait for the node to be idle
until [ "$(sinfo -h -n localhost -o '%T' 2>/dev/null)" = "idle" ]; do
  for d in slurmctld slurmd; do
    if ! kill -0 "$(cat "$D/$d.pid.child")" 2>/dev/null; then
      echo "slurm-up: $d exited:" >&2; tail -20 "$D/log/$d.out" >&2; exit 1
    fi
  done
  if [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge "$TIMEOUT" ]; then
    echo "slurm-up: node not idle after ${TIMEOUT}s" >&2; sinfo -N -l >&2 || true; exit 1
  fi
  sleep 0.1
done

echo "export SLURM_CONF=$D/slurm.conf" > "$D/env.sh"
echo "slurm-up: ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms (munged=$(cat "$D/munged.pid.child") slurmctld=$(cat "$D/slurmctld.pid.child") slurmd=$(cat "$D/slurmd.pid.child"))" >&2
echo "export SLURM_CONF=$D/slurm.conf"
