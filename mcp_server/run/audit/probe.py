"""The audit's single remote round trip: one shell script that gathers every fact the
checks need, in marked sections, and the parser that splits its output again.

The script is read-only except for one probe file it creates and removes in the durable
root (a real write is the only test that catches a full inode table)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.hosts.commands import path_word, quote
from mcp_server.run.audit.nvidia import Q_APPS, Q_CLOCKS, Q_DMON, Q_GPU, Q_PERF
from mcp_server.run.jobs.status import STATE_FUNCS

BEGIN = "@@RGT-BEGIN "
END = "@@RGT-END "
TOOLS = ("tmux", "rsync", "fuser", "lsof", "nvidia-smi", "python3", "python", "openssl",
         "sha256sum", "setsid", "timeout", "nvcc", "conda", "sbatch")
ENV_RE = ("^(https?_proxy|HTTPS?_PROXY|all_proxy|ALL_PROXY|no_proxy|NO_PROXY|HF_ENDPOINT|"
          "HF_HUB_ENABLE_HF_TRANSFER|HF_HUB_DISABLE_XET|HF_HOME|PIP_INDEX_URL|CUDA_VISIBLE_DEVICES|"
          "CONDA_PREFIX|CONDA_DEFAULT_ENV|VIRTUAL_ENV)=")

_PY_PROBE = r"""
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
"""

# Helpers the sections use. S name cmd... : one marked section with its exit code.
_PRELUDE = r"""
S() { rgt_sec=$1; shift; printf '%s%s\n' '@@RGT-BEGIN ' "$rgt_sec"; "$@" 2>&1; rgt_rc=$?; printf '\n%s%s %s\n' '@@RGT-END ' "$rgt_sec" "$rgt_rc"; }
T() { s=$1; shift; if command -v timeout >/dev/null 2>&1; then timeout "$s" "$@"; else "$@"; fi; }
have() { command -v "$1" >/dev/null 2>&1; }
tmp=$(mktemp -d 2>/dev/null || echo /tmp/rgt-audit.$$); mkdir -p "$tmp"; trap 'rm -rf "$tmp"' EXIT
exists_up() { p=$1; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done; printf '%s' "$p"; }
ident() { hostname; date +%s; id -un; uname -srm; }
tools() { for t in TOOLS_LIST; do printf '%s=%s\n' "$t" "$(command -v "$t" 2>/dev/null)"; done; }
gpu_holders() {
  devs=$(ls -d /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm 2>/dev/null)
  printf 'devices=%s\n' "$(echo $devs)"
  [ -n "$devs" ] || return 0
  if have fuser; then pids=$(fuser $devs 2>/dev/null); elif have lsof; then pids=$(lsof -t $devs 2>/dev/null); else echo 'no fuser or lsof'; return 3; fi
  printf 'pids=%s\n' "$(echo $pids)"
  [ -n "$pids" ] && ps -o pid=,etimes=,stat=,comm= -p "$(echo $pids | tr ' ' ',')" 2>/dev/null
  return 0
}
kmsg() { dmesg > "$tmp/dmesg" 2>&1; rc=$?; grep -E 'NVRM: Xid|Out of memory|oom-kill|oom_kill|Killed process' "$tmp/dmesg" | tail -n 60; [ $rc = 0 ] || head -n 2 "$tmp/dmesg"; return $rc; }
mount_facts() {
  for want in "$@"; do
    p=$(exists_up "$want")
    printf 'path=%s\texisting=%s\tfstype=%s\tdev=%s\n' "$want" "$p" "$(stat -f -c %T -- "$p" 2>/dev/null)" "$(stat -c %d -- "$p" 2>/dev/null)"
    df -P -k -- "$p" 2>&1 | tail -n 1 | sed 's/^/bytes /'
    df -P -i -- "$p" 2>&1 | tail -n 1 | sed 's/^/inodes /'
  done
}
write_probe() { [ -d "$1" ] || { echo absent; return 0; }; f=$(mktemp "$1/.rgt-probe.XXXXXX" 2>&1) || { echo "write-failed $f"; return 0; }; rm -f -- "$f"; echo ok; }
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
envs() { env > "$tmp/env"; grep -E 'ENV_RE' "$tmp/env"
  # pip's config files read directly: `pip config list` costs a second of CPU per audit.
  for f in /etc/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    [ -f "$f" ] && grep -E '^[[:space:]]*(index-url|extra-index-url|proxy)[[:space:]]*=' "$f" | sed "s|^|pip: $f: |"; done
  return 0; }
devs_of() { for p in "$@"; do [ -e "$p" ] && printf '%s\t%s\n' "$(stat -c %d -- "$p")" "$p"; done; return 0; }
envhook() { ( eval "$1" >/dev/null 2>&1; env ) > "$tmp/envh" 2>/dev/null; grep -E 'ENV_RE' "$tmp/envh"; return 0; }
container() {
  [ -f /.dockerenv ] && echo dockerenv
  [ -f /run/.containerenv ] && echo containerenv
  [ -n "$KUBERNETES_SERVICE_HOST" ] && echo kubernetes
  grep -E 'docker|kubepods|containerd|lxc' /proc/1/cgroup 2>/dev/null | head -n 1
  return 0
}
"""


@dataclass(frozen=True)
class Section:
    rc: int
    text: str


def _code_sections(code_dir: str, expect_files: dict[str, str]) -> list[str]:
    cd = path_word(code_dir, "code_dir")
    lines = [
        f"crlf() {{ [ -d {cd} ] || {{ echo absent; return 0; }}; cr=$(printf '\\r'); "
        f"find {cd} -maxdepth 4 -name '*.sh' -type f 2>/dev/null | head -n 500 > \"$tmp/sh\"; "
        "while IFS= read -r f; do n=$(grep -c \"$cr\" \"$f\" 2>/dev/null); [ \"${n:-0}\" -gt 0 ] && printf '%s\\t%s\\n' \"$n\" \"$f\"; done < \"$tmp/sh\"; "
        "printf 'scanned=%s\\n' \"$(wc -l < \"$tmp/sh\")\"; }",
        f"pins() {{ for f in {cd}/requirements*.txt; do [ -f \"$f\" ] && grep -iHnE '^(torch|torchvision|torchaudio)([^A-Za-z0-9_.-]|$)' \"$f\"; done; return 0; }}",
        "S crlf crlf",
        "S pins pins",
    ]
    if expect_files:
        words = " ".join(path_word(p, "expected file") for p in expect_files)
        lines.append(
            "hashes() { for f in " + words + "; do if [ -f \"$f\" ]; then "
            "if have sha256sum; then sha256sum -- \"$f\"; else openssl dgst -sha256 -r -- \"$f\"; fi; "
            "else printf 'missing  %s\\n' \"$f\"; fi; done; return 0; }"
        )
        lines.append("S hashes hashes")
    return lines


def build_script(
    *, mounts: list[str], durable_root: str, python: str | None, proxy_hook: str | None,
    cache_dirs: list[str], code_dir: str | None, expect_files: dict[str, str],
) -> str:
    """The whole audit as one script for one round trip."""
    prelude = _PRELUDE.replace("TOOLS_LIST", " ".join(TOOLS)).replace("ENV_RE", ENV_RE)
    mount_words = " ".join(path_word(m, "mount path") for m in mounts)
    durable = path_word(durable_root, "durable root")
    py = quote(python) if python else '"$(command -v python3 || command -v python || echo python3)"'
    lines = [
        prelude,
        # dmon samples for 5 s: start it first and collect it last so it overlaps the rest.
        f"if have nvidia-smi; then (T 15 {Q_DMON} > \"$tmp/dmon\" 2>&1; echo $? > \"$tmp/dmon.rc\") & fi",
        "S ident ident",
        "S uptime cat /proc/uptime",
        "S tools tools",
        "if have nvidia-smi; then",
        f"  S gpu T 20 {Q_GPU}",
        f"  S apps T 20 {Q_APPS}",
        f"  S clocks T 20 {Q_CLOCKS}",
        f"  S perf T 20 {Q_PERF}",
        "fi",
        "S holders gpu_holders",
        "S dmesg kmsg",
        f"S mounts mount_facts {mount_words}",
        f"S probe write_probe {durable}",
        f"S exportdev devs_of {durable}/export/.partial {durable}/export",
        "S cgroup cg",
        "S env envs",
        f"S python T 25 {py} -c {quote(_PY_PROBE)}",
        "S conda sh -c 'command -v conda >/dev/null 2>&1 || exit 0; timeout 10 conda env list'",
        "S container container",
        "S turbo sh -c 'ls /etc/network_turbo 2>/dev/null; exit 0'",
    ]
    if proxy_hook:
        lines.append(f"S envhook envhook {quote(proxy_hook)}")
    if cache_dirs:
        words = " ".join(path_word(c, "cache dir") for c in cache_dirs)
        lines.append(f"S caches sh -c 'for d in \"$@\"; do [ -d \"$d\" ] && timeout 15 du -sk -- \"$d\" 2>/dev/null; done; exit 0' sh {words}")
    if code_dir:
        lines.extend(_code_sections(code_dir, expect_files))
    # Live runs under the durable root, for the cost meter's idle warning.
    lines += [STATE_FUNCS,
              f"live_runs() {{ n=0; for d in {durable}/.rgt/runs/*/; do [ -d \"$d\" ] || continue; "
              "case \"$(rgt_state \"${d%/}\")\" in alive*|queued*) n=$((n+1));; esac; done; echo \"live=$n\"; }",
              "S runs live_runs"]
    lines.append("wait")
    lines.append("if [ -f \"$tmp/dmon\" ]; then printf '%s%s\\n' '@@RGT-BEGIN ' dmon; cat \"$tmp/dmon\"; "
                 "printf '\\n%s%s %s\\n' '@@RGT-END ' dmon \"$(cat \"$tmp/dmon.rc\" 2>/dev/null || echo 1)\"; fi")
    return "\n".join(lines) + "\n"


_END_RE = re.compile(r"^@@RGT-END (\S+) (-?\d+)$")


def parse_sections(text: str) -> dict[str, Section]:
    """Split the script's output into its sections (a section that never ended is kept
    with rc -1 so a check can say the probe was cut short)."""
    out: dict[str, Section] = {}
    name: str | None = None
    buf: list[str] = []
    for line in text.splitlines():
        if line.startswith(BEGIN):
            name, buf = line[len(BEGIN):].strip(), []
            continue
        m = _END_RE.match(line)
        if m and name == m.group(1):
            body = "\n".join(buf)
            out[name] = Section(int(m.group(2)), body[:-1] if body.endswith("\n") else body.rstrip("\n"))
            name = None
            continue
        if name is not None:
            buf.append(line)
    if name is not None:
        out[name] = Section(-1, "\n".join(buf))
    return out
