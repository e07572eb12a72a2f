"""Run status from the process table and the exit file — never from log text.

running    the wrapper's pid is alive (same boot, not a zombie, its cmdline is our wrapper)
succeeded  exit_code is 0 (and, when the run asked for sync_to_durable, every copy verified)
failed     exit_code is non-zero (the code says how: 137 = SIGKILL, often the OOM killer)
sync_failed  exit_code is 0 but the copy of its outputs to the durable root failed: the wrapper's
           sync_status says why; the scratch copy is still the only one
queued     waiting in an on-box queue whose runner is alive
orphaned   the wrapper is gone but the run's command still runs (its shell and children live):
           still holding the GPU; the wrapper will record no exit code; cancel_run stops it
cancelled  stopped by cancel_run (its `cancelled` file) and no longer alive; the exit code when
           the job wrote one on its way out — never reported as failed or lost
lost       no live process and no exit file: killed hard, OOM-killed with the wrapper, or the
           box rebooted; `evidence` says which facts point where
unknown    the box could not be reached: a transport failure proves nothing about the job

On the box, `rgt_state` (scripts/job_state.sh) prints the state line; `StateLine` is the one
place that reads or writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.run.jobs.rundir import RunStatus

# The shell functions every script that reads run state is prepended with. $1 = absolute run dir.
STATE_FUNCS = scripts.load("job_state")

# The statuses of a run whose wrapper has exited and recorded how.
FINISHED: tuple[RunStatus, ...] = ("succeeded", "failed", "sync_failed")
# Every status of a run that has ended, however it ended.
ENDED: tuple[RunStatus, ...] = (*FINISHED, "cancelled", "lost")
# A run that still holds the box: teardown waits for it, launch will not start its name again.
LIVE: tuple[RunStatus, ...] = ("running", "queued", "orphaned")

# Exit codes 128+N: the command died of signal N (the wrapper records them; it outlives TERM).
_SIGNAL_CODES = {
    129: " (SIGHUP)", 130: " (SIGINT)", 134: " (SIGABRT: an abort, often a failed assertion in native code)",
    137: " (SIGKILL: the OOM killer, a hard stop, or KILL after a grace period)",
    139: " (SIGSEGV: a crash in native code)",
    143: " (SIGTERM: stopped from outside — a platform stop, a preemption, kill — and the wrapper recorded it)",
}
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
    sync: str | None = Field(default=None, description="sync_to_durable outcome")


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
    """One `rgt_state` line: kind (cancelled, exited, alive, queued, orphaned, gone), then the exit code, wrapper pid
    or queue id, ended_at, log size and log mtime; tab-separated, or `|`-separated where a
    script carries it inside a key=value line. "-" stands for a missing field. A run that
    exited 0 and asked for sync_to_durable has a sixth field, the rest of the line: the sync
    result, `ok <what was copied>` or `failed <reason>` (it may hold `|`, so it is never split); a
    queued run held by the disk floor has `held <reason>` there; an orphaned run its live processes."""

    kind: str
    detail: str | None = None
    ended_at: str | None = None
    log_size: str | None = None
    log_mtime: str | None = None
    sync: str | None = None

    @classmethod
    def parse(cls, text: str) -> StateLine:
        parts = [_field(p) for p in _FIELD_SEPARATOR.split(text.strip("\r\n"), maxsplit=5)]
        kind, detail, ended_at, log_size, log_mtime, sync = (parts + [None] * 6)[:6]
        return cls(kind or "", detail, ended_at, log_size, log_mtime, sync)

    def format(self) -> str:
        fields = (self.kind, self.detail, self.ended_at, self.log_size, self.log_mtime)
        line = "\t".join(_NONE if f is None else f for f in fields)
        return line if self.sync is None else f"{line}\t{self.sync}"

    def to_state(self) -> RunState:
        """The status this line proves (a lost run's causes come from `lost_evidence`)."""
        detail = self.detail or ""
        size = self.log_size or ""
        common = {"log_size": int(size) if size.isdigit() else None, "log_mtime": _num(self.log_mtime)}
        if self.kind == "cancelled":
            code = int(detail) if detail.lstrip("-").isdigit() else None
            return RunState(status="cancelled", exit_code=code, ended_at=_num(self.ended_at),
                            evidence=["cancelled file: stopped by cancel_run, and no live wrapper process"
                                      + (f"; the job exited {code} on its way out" if code is not None else "")],
                            **common)
        if self.kind == "exited" and detail.lstrip("-").isdigit():
            return self._exited(int(detail), common)
        if self.kind == "alive" and detail.isdigit():
            return RunState(status="running", pid=int(detail), evidence=[f"wrapper pid {detail} is alive"], **common)
        if self.kind == "queued":
            held = [f"held: the disk is below the launch floor ({self.sync[5:]}); it starts once space is freed"
                    ] if self.sync and self.sync.startswith("held ") else []
            return RunState(status="queued", evidence=[f"waiting in queue {detail}, whose runner is alive", *held],
                            **common)
        pid = int(detail) if detail.isdigit() else None
        if self.kind == "orphaned":
            return RunState(status="orphaned", pid=pid, evidence=[
                f"the wrapper{f' (pid {pid})' if pid else ''} is gone but the run's command still runs: "
                f"{self.sync or 'its processes'}; it holds what it held (GPU memory included) and will record "
                "no exit code — cancel_run stops it"], **common)
        return RunState(status="lost", pid=pid,
                        evidence=[f"no live wrapper process{f' (pid {pid})' if pid else ''} and no exit_code file"],
                        **common)

    def _exited(self, code: int, common: dict[str, Any]) -> RunState:
        """A finished run: its exit code, and for exit 0 the outcome of its copy to the durable root."""
        evidence = [f"exit_code file says {code}" + _SIGNAL_CODES.get(code, "")]
        ended_at = _num(self.ended_at)
        if code != 0:
            return RunState(status="failed", exit_code=code, ended_at=ended_at, evidence=evidence, **common)
        if self.sync is None:
            return RunState(status="succeeded", exit_code=0, ended_at=ended_at, evidence=evidence, **common)
        outcome, _, text = self.sync.partition(" ")
        ok = outcome == "ok"
        evidence.append(f"sync_status says {outcome}" + ("" if ok else ": the copy to the durable root failed"))
        return RunState(status="succeeded" if ok else "sync_failed", exit_code=0, ended_at=ended_at,
                        evidence=evidence, sync=text or self.sync, **common)


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
