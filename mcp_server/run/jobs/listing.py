"""list_runs: the runs on a box, read from its run directories (the source of truth), with
the ledger reconciled against what the box says, plus the cost meter."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.teardown.cost import accrued
from mcp_server.run.audit.nvidia import Q_GPU, Gpu, parse_gpus
from mcp_server.run.jobs.rundir import RunOutputs, RunPaths, RunStatus
from mcp_server.run.jobs.status import STATE_FUNCS, parse_state

MAX_RUNS = 200
TERMINAL = ("succeeded", "failed", "lost")


class RunSummary(BaseModel):
    run_id: str
    name: str | None = None
    status: RunStatus
    exit_code: int | None = None
    started_at_utc: str | None = None
    command: str | None = Field(default=None, description="first 200 characters")
    log_size: int | None = None
    seconds_since_write: float | None = None
    in_ledger: bool = Field(description="false: launched by another server or ledger")
    ended_at: float | None = Field(default=None, description="epoch seconds the run ended (exit file, else last log write)")
    outputs: RunOutputs | None = None


class HostRuns(BaseModel):
    host: str
    runs: list[RunSummary] = Field(description="oldest first, at most the last 200")
    live: int
    missing_on_box: list[str] = Field(description="run ids the ledger knows that the box no longer has")
    accrued_cost: str | None = None
    idle_warning: str | None = None


def _script(spec: HostSpec) -> str:
    runs = RunPaths(spec.durable_root, "x").runs
    return f"""{STATE_FUNCS}
printf 'now=%(%s)T\\n' -1
command -v nvidia-smi >/dev/null 2>&1 && {Q_GPU} 2>/dev/null | sed 's/^/gpu=/'
[ -d {runs} ] || exit 0
ls -1 {runs} 2>/dev/null | grep -v '^queue-' | tail -n {MAX_RUNS} | while IFS= read -r r; do
  d={runs}/"$r"; [ -f "$d/run.json" ] || continue
  printf 'run=%s\\t%s\\t%s\\n' "$r" "$(rgt_state "$d" | tr '\\t' '|')" "$(head -c 65536 "$d/run.json" | base64 | tr -d '\\n')"
done
"""


def _summary(run_id: str, state_line: str, record_b64: str, now: float, known: set[str]) -> RunSummary:
    state = parse_state(state_line.replace("|", "\t"))
    try:
        rec = json.loads(base64.b64decode(record_b64))
    except ValueError:
        rec = {}
    started = rec.get("started_at")
    return RunSummary(
        run_id=run_id, name=rec.get("name"), status=state.status, exit_code=state.exit_code,
        started_at_utc=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds") if started else None,
        command=(rec.get("command") or "")[:200] or None, log_size=state.log_size,
        seconds_since_write=(now - state.log_mtime) if state.log_mtime else None, in_ledger=run_id in known,
        ended_at=None if state.status in ("running", "queued") else (state.ended_at or state.log_mtime),
        outputs=RunOutputs.model_validate(rec["outputs"]) if rec.get("outputs") else None,
    )


async def list_runs(host: Host, spec: HostSpec, ledger: Ledger) -> HostRuns:
    res = await host.run(_script(spec), timeout=25)
    res.check("listing runs")
    launched = {e.run_id for e in ledger.events("launch", host=spec.name, limit=10000) if e.run_id}
    now, runs = 0.0, []
    gpus: list[Gpu] = []
    for line in res.text.splitlines():
        key, _, value = line.partition("=")
        if key == "now":
            now = float(value)
        elif key == "gpu":
            gpus += parse_gpus(value)[0]
        elif key == "run":
            parts = value.split("\t")
            if len(parts) == 3:
                runs.append(_summary(parts[0], parts[1], parts[2], now, launched))
    _record_transitions(ledger, spec, runs)
    on_box = {r.run_id for r in runs}
    live = sum(1 for r in runs if r.status in ("running", "queued"))
    return HostRuns(host=spec.name, runs=runs, live=live,
                    missing_on_box=sorted(launched - on_box) if len(runs) < MAX_RUNS else [],
                    accrued_cost=accrued(ledger, spec), idle_warning=_idle_warning(spec, ledger, live, gpus))


def _record_transitions(ledger: Ledger, spec: HostSpec, runs: list[RunSummary]) -> None:
    """Terminal states the ledger has not recorded yet become run_status events."""
    for r in runs:
        if r.status not in TERMINAL:
            continue
        last = ledger.latest("run_status", host=spec.name, run_id=r.run_id)
        if last is None or last.data.get("status") != r.status:
            ledger.record("run_status", host=spec.name, run_id=r.run_id, summary=r.status,
                          data={"status": r.status, "exit_code": r.exit_code})


def _idle_warning(spec: HostSpec, ledger: Ledger, live: int, gpus: list[Gpu]) -> str | None:
    """Warn (never act) when a billed box has no live run and every GPU is idle."""
    if not spec.profile.billed or live or not gpus:
        return None
    idle = all((g.utilization_pct or 0) < 5 and (g.memory_used_mib or 0) < 1024 for g in gpus)
    if not idle:
        return None
    cost = accrued(ledger, spec)
    return (f"the meter is running on an idle box: no live run and {len(gpus)} idle GPU(s)"
            f"{'; ' + cost if cost else ''}. Pull and verify results, then plan a teardown "
            "(teardown without a token shows what stops billing) — nothing was stopped.")
