"""Run status from the process table and the exit file — never from log text.

running    the wrapper's pid is alive (same boot, not a zombie, its cmdline is our wrapper)
succeeded  exit_code is 0
failed     exit_code is non-zero (the code says how: 137 = SIGKILL, often the OOM killer)
queued     waiting in an on-box queue whose runner is alive
lost       no live process and no exit file: killed hard, OOM-killed with the wrapper, or the
           box rebooted; `evidence` says which facts point where
unknown    the box could not be reached: a transport failure proves nothing about the job

On the box, `rgt_state` (scripts/job_state.sh) prints the state line; `StateLine` is the one
place that reads or writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.run.jobs.rundir import RunStatus

# The shell functions every script that reads run state is prepended with. $1 = absolute run dir.
STATE_FUNCS = scripts.load("job_state")

_FIELD_SEPARATOR = re.compile(r"[\t|]")
_NONE = "-"


class RunState(BaseModel):
    status: RunStatus
    exit_code: int | None = None
    pid: int | None = None
    ended_at: float | None = None
    log_size: int | None = None
    log_mtime: float | None = None
    evidence: list[str] = Field(default_factory=list, description="the facts the status rests on")


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _field(v: str) -> str | None:
    v = v.strip()
    return None if v in ("", _NONE) else v


@dataclass(frozen=True)
class StateLine:
    """One `rgt_state` line: kind (exited, alive, queued, gone), then the exit code, wrapper pid
    or queue id, ended_at, log size and log mtime; tab-separated, or `|`-separated where a
    script carries it inside a key=value line. "-" stands for a missing field."""

    kind: str
    detail: str | None = None
    ended_at: str | None = None
    log_size: str | None = None
    log_mtime: str | None = None

    @classmethod
    def parse(cls, text: str) -> StateLine:
        parts = [_field(p) for p in _FIELD_SEPARATOR.split(text.strip("\r\n"))]
        kind, detail, ended_at, log_size, log_mtime = (parts + [None] * 5)[:5]
        return cls(kind or "", detail, ended_at, log_size, log_mtime)

    def format(self) -> str:
        fields = (self.kind, self.detail, self.ended_at, self.log_size, self.log_mtime)
        return "\t".join(_NONE if f is None else f for f in fields)

    def to_state(self) -> RunState:
        """The status this line proves (a lost run's causes come from `lost_evidence`)."""
        detail = self.detail or ""
        size = self.log_size or ""
        common = {"log_size": int(size) if size.isdigit() else None, "log_mtime": _num(self.log_mtime)}
        if self.kind == "exited" and detail.lstrip("-").isdigit():
            code = int(detail)
            return RunState(status="succeeded" if code == 0 else "failed", exit_code=code,
                            ended_at=_num(self.ended_at), evidence=[f"exit_code file says {code}"], **common)
        if self.kind == "alive" and detail.isdigit():
            return RunState(status="running", pid=int(detail), evidence=[f"wrapper pid {detail} is alive"], **common)
        if self.kind == "queued":
            return RunState(status="queued", evidence=[f"waiting in queue {detail}, whose runner is alive"], **common)
        pid = int(detail) if detail.isdigit() else None
        return RunState(status="lost", pid=pid,
                        evidence=[f"no live wrapper process{f' (pid {pid})' if pid else ''} and no exit_code file"],
                        **common)


def parse_state(text: str) -> RunState:
    """One state line as the box printed it -> RunState (without lost-cause evidence)."""
    return StateLine.parse(text).to_state()


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
