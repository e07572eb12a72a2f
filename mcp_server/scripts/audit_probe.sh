#!/bin/sh
# The audit's one round trip: every fact the checks need, in marked sections
# (@@RGT-BEGIN name ... @@RGT-END name rc). Read-only except for one probe file created
# and removed in the durable root (a real write is the only test that catches a full
# inode table).
#
# Arguments: CHECK_COUNT CHECK... WORD_COUNT WORD...
#            DURABLE_ROOT PYTHON PROXY_HOOK CODE_DIR SLURM
#            MOUNT_COUNT MOUNT... CACHE_COUNT CACHE_DIR... EXPECTED_FILE...
# CHECK: a path the caller named (code_dir, an extra path to measure), put through the path
# policy first (path_policy.sh runs ahead of this; read intent, rgt_check's WORDs): one line
# each in the `policy` section, and when any is refused nothing else runs.
# PYTHON, PROXY_HOOK and CODE_DIR may be empty (first python on PATH / no hook / no code
# checks); SLURM is 1 on a Slurm login node (the cluster's partitions, your pending jobs and
# limits are read too). `rgt_state` (the jobs' state functions) and box_interp.sh's `rgt_interps`
# are defined ahead of this script.

# S name cmd... : one marked section with its exit code.
S() { rgt_sec=$1; shift; printf '%s%s\n' '@@RGT-BEGIN ' "$rgt_sec"; "$@" 2>&1; rgt_rc=$?; printf '\n%s%s %s\n' '@@RGT-END ' "$rgt_sec" "$rgt_rc"; }
T() { s=$1; shift; if command -v timeout >/dev/null 2>&1; then timeout "$s" "$@"; else "$@"; fi; }
have() { command -v "$1" >/dev/null 2>&1; }
tmp=$(mktemp -d 2>/dev/null || echo /tmp/rgt-audit.$$); mkdir -p "$tmp"; trap 'rm -rf "$tmp"' EXIT
exists_up() { p=$1; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done; printf '%s' "$p"; }
ident() { hostname; date +%s; id -un; uname -srm; }
tools() {
  for t in tmux rsync fuser lsof nvidia-smi python3 python openssl sha256sum setsid timeout nvcc conda sbatch; do
    printf '%s=%s\n' "$t" "$(command -v "$t" 2>/dev/null)"
  done
}
# Words on one line, single-spaced (device names and pids have no spaces).
one_line() { xargs; }
gpu_holders() {
  devs=$(ls -d /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm 2>/dev/null)
  printf 'devices=%s\n' "$(printf '%s\n' "$devs" | one_line)"
  [ -n "$devs" ] || return 0
  if have fuser; then pids=$(printf '%s\n' "$devs" | xargs fuser 2>/dev/null)
  elif have lsof; then pids=$(printf '%s\n' "$devs" | xargs lsof -t 2>/dev/null)
  else echo 'no fuser or lsof'; return 3; fi
  pids=$(printf '%s\n' "$pids" | one_line)
  printf 'pids=%s\n' "$pids"
  [ -n "$pids" ] || return 0
  ps -o pid=,etimes=,stat=,comm= -p "$(printf '%s' "$pids" | tr ' ' ',')" 2>/dev/null
  # Each holder's chain of parents as pid:ppid pairs up to pid 1: a child of a listed compute
  # process (a dataloader worker) is in use, not a zombie. One ps, walked by awk.
  ps -e -o pid=,ppid= 2>/dev/null | awk -v want="$pids" 'BEGIN { n = split(want, w, " ") }
    { parent[$1] = $2 }
    END { for (i = 1; i <= n; i++) { p = w[i]; d = 0
            while (p > 1 && (p in parent) && !(p in seen) && d < 64) {
              seen[p] = 1; out = out sep p ":" parent[p]; sep = " "; p = parent[p]; d++ } }
          print "ppid=" out }'
  return 0
}
kmsg() {
  dmesg > "$tmp/dmesg" 2>&1; rc=$?
  # GPU faults (Xid, and bus loss or init failure, which may carry no Xid) and OOM kills.
  grep -E 'NVRM: Xid|NVRM: The NVIDIA GPU|fallen off the bus|RmInitAdapter failed|GPU lost from the bus|GPU is lost|Out of memory|oom-kill|oom_kill|Killed process' "$tmp/dmesg" | tail -n 60
  [ "$rc" = 0 ] || head -n 2 "$tmp/dmesg"
  return $rc
}
# mount_facts N PATH... : bytes and inodes of the first N paths (or their nearest existing parent).
mount_facts() {
  n=$1; shift
  while [ "$n" -gt 0 ]; do
    want=$1; shift; n=$((n - 1))
    p=$(exists_up "$want")
    printf 'path=%s\texisting=%s\tfstype=%s\tdev=%s\n' "$want" "$p" "$(stat -f -c %T -- "$p" 2>/dev/null)" "$(stat -c %d -- "$p" 2>/dev/null)"
    df -P -k -- "$p" 2>&1 | tail -n 1 | sed 's/^/bytes /'
    df -P -i -- "$p" 2>&1 | tail -n 1 | sed 's/^/inodes /'
  done
}
# write_probe DIR: a 64 KiB write, not an empty file: an empty file needs an inode but no bytes,
# so it succeeds on a disk with 0 bytes free.
write_probe() { [ -d "$1" ] || { echo absent; return 0; }; f=$(mktemp "$1/.rgt-probe.XXXXXX" 2>&1) || { echo "write-failed $f"; return 0; }
  if ! e=$(head -c 65536 /dev/zero 2>&1 > "$f"); then rm -f -- "$f"; echo "write-failed ${e:-no space for 64 KiB}"; return 0; fi
  rm -f -- "$f"; echo ok; }
cg() {
  rel=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null | head -n 1)
  for d in "/sys/fs/cgroup$rel" /sys/fs/cgroup; do
    if [ -f "$d/memory.max" ] || [ -f "$d/cpu.max" ]; then
      echo "v2 $d"
      for f in memory.max memory.current cpu.max; do printf '%s=%s\n' "$f" "$(cat "$d/$f" 2>/dev/null)"; done
      printf 'oom_kill=%s\n' "$(sed -n 's/^oom_kill //p' "$d/memory.events" 2>/dev/null)"
      break
    fi
  done
  if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    echo v1
    printf 'memory.max=%s\n' "$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    printf 'memory.current=%s\n' "$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null)"
    printf 'oom_kill=%s\n' "$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null)"
    printf 'cpu.max=%s %s\n' "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null)" "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null)"
  fi
  printf 'nproc=%s\n' "$(nproc 2>/dev/null)"
  sed -n 's/^MemTotal: *\([0-9]*\) kB/memtotal_kb=\1/p' /proc/meminfo
}
env_re='^(https?_proxy|HTTPS?_PROXY|all_proxy|ALL_PROXY|no_proxy|NO_PROXY|HF_ENDPOINT|HF_HUB_ENABLE_HF_TRANSFER|HF_HUB_DISABLE_XET|HF_HOME|PIP_INDEX_URL|CUDA_VISIBLE_DEVICES|CONDA_PREFIX|CONDA_DEFAULT_ENV|VIRTUAL_ENV)='
envs() {
  env > "$tmp/env"; grep -E "$env_re" "$tmp/env"
  # pip's config files read directly: `pip config list` costs a second of CPU per audit.
  for f in /etc/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    [ -f "$f" ] && grep -E '^[[:space:]]*(index-url|extra-index-url|proxy)[[:space:]]*=' "$f" | sed "s|^|pip: $f: |"
  done
  return 0
}
devs_of() { for p in "$@"; do [ -e "$p" ] && printf '%s\t%s\n' "$(stat -c %d -- "$p")" "$p"; done; return 0; }
envhook() { ( eval "$1" >/dev/null 2>&1; env ) > "$tmp/envh" 2>/dev/null; grep -E "$env_re" "$tmp/envh"; return 0; }
container() {
  [ -f /.dockerenv ] && echo dockerenv
  [ -f /run/.containerenv ] && echo containerenv
  [ -n "$KUBERNETES_SERVICE_HOST" ] && echo kubernetes
  grep -E 'docker|kubepods|containerd|lxc' /proc/1/cgroup 2>/dev/null | head -n 1
  return 0
}
# cache_sizes N DIR... : du of the first N directories that exist.
cache_sizes() {
  n=$1; shift
  while [ "$n" -gt 0 ]; do
    d=$1; shift; n=$((n - 1))
    [ -d "$d" ] && timeout 15 du -sk -- "$d" 2>/dev/null
  done
  return 0
}
crlf() {
  [ -d "$code_dir" ] || { echo absent; return 0; }
  cr=$(printf '\r')
  find "$code_dir" -maxdepth 4 -name '*.sh' -type f 2>/dev/null | head -n 500 > "$tmp/sh"
  while IFS= read -r f; do n=$(grep -c "$cr" "$f" 2>/dev/null); [ "${n:-0}" -gt 0 ] && printf '%s\t%s\n' "$n" "$f"; done < "$tmp/sh"
  printf 'scanned=%s\n' "$(wc -l < "$tmp/sh")"
}
pins() {
  for f in "$code_dir"/requirements*.txt; do
    [ -f "$f" ] && [ ! -L "$f" ] && grep -iHnE '^(torch|torchvision|torchaudio)([^A-Za-z0-9_.-]|$)' "$f"
  done
  return 0
}
hashes() {
  for f in "$@"; do
    if [ -f "$f" ]; then
      if have sha256sum; then sha256sum -- "$f"; else openssl dgst -sha256 -r -- "$f"; fi
    else printf 'missing  %s\n' "$f"; fi
  done
  return 0
}
# Live runs under the durable root, for the cost meter's idle warning.
live_runs() {
  n=0
  for d in "$durable_root"/.rgt/runs/*/; do
    [ -d "$d" ] || continue
    case "$(rgt_state "${d%/}")" in alive*|queued*) n=$((n+1));; esac
  done
  echo "live=$n"
}
# Python's own view of the environment (the program has no single quote in it).
py_probe='
import json, os, sys
out = {"executable": sys.executable, "version": sys.version.split()[0], "prefix": sys.prefix}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    if out["cuda_available"]:
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    out["num_threads"] = torch.get_num_threads()
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
sys.stdout.write(json.dumps(out) + "\n")
'

# For A18, the facts prepare_box decides the right interpreter from: the named one, what a launch's
# (non-login) python/python3 reach, the login shell's, and the PATH line of the box env file.
interps() {
  printf 'asked=%s\n' "$1"
  rgt_interps "$1"
  grep -E '^export PATH=' "$durable_root/.rgt/box.env" 2>/dev/null | tail -n 1 | sed 's/^/box_env_path=/'
  return 0
}

# The cluster as a login node sees it: partitions (GPU GRES, node states), your pending jobs
# with Slurm's reasons, your associations' limits (only where an accounting database answers).
cluster() {
  me=$(id -un)
  S sinfo T 15 sinfo -h -o '%P|%a|%l|%D|%t|%G'
  S pending T 15 squeue -h -u "$me" -t PENDING -o '%i|%r|%P'
  S assoc T 15 sacctmgr -n -P show assoc user="$me" format=Account,Partition,QOS,MaxTRES,MaxJobs,MaxSubmit
}

# Whether logind ends this session's processes at logout (A35): the session scope this shell is
# in, who we are, logind's own answer (busctl: KillUserProcesses, KillExcludeUsers, KillOnlyUsers)
# and, without busctl, logind.conf's lines for them.
logind() {
  printf 'scope=%s\n' "$(grep -o 'session-[^/]*\.scope' /proc/self/cgroup 2>/dev/null | head -n 1)"
  printf 'user=%s\n' "$(id -un)"
  grep -q 'session-[^/]*\.scope' /proc/self/cgroup 2>/dev/null || return 0
  if have busctl; then
    T 5 busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager \
      KillUserProcesses KillExcludeUsers KillOnlyUsers 2>/dev/null | sed 's/^/bus=/'
  fi
  cat /usr/lib/systemd/logind.conf /etc/systemd/logind.conf /usr/lib/systemd/logind.conf.d/*.conf \
    /run/systemd/logind.conf.d/*.conf /etc/systemd/logind.conf.d/*.conf 2>/dev/null \
    | sed -n 's/^[[:space:]]*\(Kill\(UserProcesses\|ExcludeUsers\|OnlyUsers\)=.*\)/conf=\1/p'
  return 0
}

# gate N PATH... M WORD... : rgt_check (read) of each PATH within the M WORDs, one line each:
# the resolved path or the refusal; 1 when any was refused.
gate() {
  n=$1; shift; list=''
  while [ "$n" -gt 0 ]; do list="$list$1
"; shift; n=$((n - 1)); done
  # Keep the first M words as the positional parameters (POSIX sh has no arrays).
  m=$1; shift; k=$#; i=0
  for w do [ "$i" -lt "$m" ] && set -- "$@" "$w"; i=$((i + 1)); done
  shift "$k"
  bad=0
  while IFS= read -r p; do
    [ -n "$p" ] || continue
    if rgt_check read "$p" "$@"; then printf '%s\n' "$RGT_REAL"; else printf '%s\n' "$RGT_REFUSAL"; bad=1; fi
  done <<EOF
$list
EOF
  return "$bad"
}

S policy gate "$@"
[ "$rgt_rc" = 0 ] || exit 0
shift $(($1 + 1))
shift $(($1 + 1))
durable_root=$1 python_bin=$2 proxy_hook=$3 code_dir=$4 slurm=$5
shift 5
# dmon samples for 5 s: start it first and collect it last so it overlaps the rest.
if have nvidia-smi; then (T 15 nvidia-smi dmon -s pucvmet -c 5 > "$tmp/dmon" 2>&1; echo $? > "$tmp/dmon.rc") & fi
S ident ident
S uptime cat /proc/uptime
S tools tools
if have nvidia-smi; then
  S gpu T 20 nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,utilization.gpu,temperature.gpu,driver_version,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits
  S apps T 20 nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits
  S clocks T 20 nvidia-smi --query-gpu=index,temperature.gpu,clocks.current.sm,clocks.max.sm --format=csv,noheader,nounits
  S perf T 20 nvidia-smi -q -d PERFORMANCE
fi
S holders gpu_holders
S dmesg kmsg
mount_count=$1; shift
S mounts mount_facts "$mount_count" "$@"
shift "$mount_count"
S probe write_probe "$durable_root"
S exportdev devs_of "$durable_root/export/.partial" "$durable_root/export"
S cgroup cg
S env envs
S interp interps "$python_bin"
[ -n "$python_bin" ] || python_bin=$(command -v python3 || command -v python || echo python3)
S python T 25 "$python_bin" -c "$py_probe"
S conda sh -c 'command -v conda >/dev/null 2>&1 || exit 0; timeout 10 conda env list'
S container container
S turbo sh -c 'ls /etc/network_turbo 2>/dev/null; exit 0'
S logind logind
[ -z "$proxy_hook" ] || S envhook envhook "$proxy_hook"
cache_count=$1; shift
[ "$cache_count" = 0 ] || S caches cache_sizes "$cache_count" "$@"
shift "$cache_count"
if [ -n "$code_dir" ]; then
  S crlf crlf
  S pins pins
  [ $# = 0 ] || S hashes hashes "$@"
fi
S runs live_runs
[ "$slurm" = 1 ] && cluster
wait
if [ -f "$tmp/dmon" ]; then
  printf '%s%s\n' '@@RGT-BEGIN ' dmon; cat "$tmp/dmon"
  printf '\n%s%s %s\n' '@@RGT-END ' dmon "$(cat "$tmp/dmon.rc" 2>/dev/null || echo 1)"
fi
