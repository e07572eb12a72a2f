"""Run status from the process table and the exit file — never from log text.

running    the wrapper's pid is alive (same boot, not a zombie, its cmdline is our wrapper)
succeeded  exit_code is 0
failed     exit_code is non-zero (the code says how: 137 = SIGKILL, often the OOM killer)
queued     waiting in an on-box queue whose runner is alive
lost       no live process and no exit file: killed hard, OOM-killed with the wrapper, or the
           box rebooted; `evidence` says which facts point where
unknown    the box could not be reached: a transport failure proves nothing about the job
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_server.run.jobs.rundir import RunStatus

# Shell functions shared by every script that reads run state. $1 = absolute run dir.
STATE_FUNCS = r"""
rgt_oom() { rel=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null | head -n 1)
  for f in "/sys/fs/cgroup$rel/memory.events" /sys/fs/cgroup/memory.events; do
    [ -f "$f" ] && { sed -n 's/^oom_kill //p' "$f"; return; }; done
  sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; }
rgt_alive() { pid=$2; [ -n "$pid" ] || return 1
  [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" = "$(cat "$1/boot_id" 2>/dev/null)" ] || return 1
  st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st#Z}" = "$st" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$3"; }
rgt_state() { d=$1
  lsz=$(stat -c %s "$d/log" 2>/dev/null || echo -); lmt=$(stat -c %Y "$d/log" 2>/dev/null || echo -)
  if [ -f "$d/exit_code" ]; then
    printf 'exited\t%s\t%s\t%s\t%s\n' "$(cat "$d/exit_code")" "$(cat "$d/ended_at" 2>/dev/null || echo -)" "$lsz" "$lmt"; return; fi
  pid=$(cat "$d/pid" 2>/dev/null)
  if rgt_alive "$d" "$pid" "$d/wrapper.sh"; then printf 'alive\t%s\t-\t%s\t%s\n' "$pid" "$lsz" "$lmt"; return; fi
  if [ -z "$pid" ] && [ -f "$d/queued" ]; then
    q=$(cat "$d/queued"); qd=$(dirname "$d")/$q
    if rgt_alive "$qd" "$(cat "$qd/pid" 2>/dev/null)" "$qd/queue.sh"; then printf 'queued\t%s\t-\t%s\t%s\n' "$q" "$lsz" "$lmt"; return; fi
  fi
  printf 'gone\t%s\t-\t%s\t%s\n' "${pid:--}" "$lsz" "$lmt"; }
rgt_lost_facts() { d=$1
  printf 'boot_then=%s\nboot_now=%s\n' "$(cat "$d/boot_id" 2>/dev/null)" "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
  printf 'oom_then=%s\noom_now=%s\n' "$(cat "$d/oom_base" 2>/dev/null)" "$(rgt_oom)"
  printf 'uptime=%s\nnow=%s\n' "$(cut -d' ' -f1 /proc/uptime)" "$(date +%s)"
  printf 'started=%s\n' "$(stat -c %Y "$d/pid" 2>/dev/null || stat -c %Y "$d/run.json" 2>/dev/null)"
  pid=$(cat "$d/pid" 2>/dev/null)
  [ -n "$pid" ] && dmesg 2>/dev/null > "$d/.dmesg.$$" && { grep -E "Killed process $pid[^0-9]|oom-kill.*pid=$pid[^0-9]" "$d/.dmesg.$$" | tail -n 3 | sed 's/^/dmesg=/'; }
  rm -f -- "$d/.dmesg.$$"; return 0; }
"""


class RunState(BaseModel):
    status: RunStatus
    exit_code: int | None = None
    pid: int | None = None
    ended_at: float | None = None
    log_size: int | None = None
    log_mtime: float | None = None
    evidence: list[str] = Field(default_factory=list, description="the facts the status rests on")


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def parse_state(line: str) -> RunState:
    """One `rgt_state` line -> RunState (without lost-cause evidence)."""
    parts = (line.rstrip("\n").split("\t") + ["-"] * 5)[:5]
    kind, a, b, size, mtime = parts
    common = {"log_size": int(size) if size.isdigit() else None, "log_mtime": _num(mtime)}
    if kind == "exited" and a.strip().lstrip("-").isdigit():
        code = int(a)
        return RunState(status="succeeded" if code == 0 else "failed", exit_code=code, ended_at=_num(b),
                        evidence=[f"exit_code file says {code}"], **common)
    if kind == "alive":
        return RunState(status="running", pid=int(a), evidence=[f"wrapper pid {a} is alive"], **common)
    if kind == "queued":
        return RunState(status="queued", evidence=[f"waiting in queue {a}, whose runner is alive"], **common)
    pid = int(a) if a.isdigit() else None
    return RunState(status="lost", pid=pid,
                    evidence=[f"no live wrapper process{f' (pid {pid})' if pid else ''} and no exit_code file"],
                    **common)


def lost_evidence(facts: dict[str, str], dmesg: list[str]) -> list[str]:
    """Say which evidence points where for a lost run: reboot, OOM, or a hard kill."""
    out = []
    if facts.get("boot_then") and facts.get("boot_now") and facts["boot_then"] != facts["boot_now"]:
        up = _num(facts.get("uptime", "")) or 0
        out.append(f"the box rebooted (boot id changed; up {up / 60:.0f} min): every detached job died with it")
    then, now = facts.get("oom_then", ""), facts.get("oom_now", "")
    if then.isdigit() and now.isdigit() and int(now) > int(then):
        out.append(f"cgroup oom_kill counter rose from {then} to {now} since launch: the OOM killer ran")
    out += [f"kernel log: {line[:200]}" for line in dmesg]
    if not out:
        out.append("no reboot and no OOM kill recorded: most likely killed hard (SIGKILL to the whole "
                   "process group, e.g. a manual kill or the platform's gateway)")
    return out
