"""list_runs: the runs on a box, read from the run directories (the source of truth) in one pass
(runscan.py), newest first and paged, with the ledger reconciled against what the box says, plus
the cost meter."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from pydantic import BaseModel, Field, model_validator

from mcp_server import scripts
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.audit.nvidia import Q_GPU_FIELDS, Gpu, parse_gpus
from mcp_server.run.jobs.rundir import RunOutputs, RunRecordSummary, RunStatus
from mcp_server.run.jobs.runscan import BoxRun, RunFilter, page, read_records, scan_script, scanned_runs
from mcp_server.run.jobs.status import ENDED, LIVE
from mcp_server.run.teardown.cost import accrued

TERMINAL = ENDED


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
    ended_at: float | None = Field(
        default=None, description="epoch seconds the run ended (exit file, else last log write)")
    outputs: RunOutputs | None = None
    output_dir: str | None = Field(default=None, description="where the run writes by relative path")
    sync: str | None = Field(default=None, description="sync_to_durable outcome")
    patrol: str | None = Field(default=None, description="an on-box patrol's last line and escalation count")


class HostRuns(BaseModel):
    host: str
    runs: list[RunSummary] = Field(description="this page: newest first by start time")
    total: int = Field(default=-1, description="runs on the box that match the filters (every page together)")
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page; none: last page")
    live: int = Field(description="running, queued or orphaned runs on the box (whatever the filters)")
    missing_on_box: list[str] = Field(description="run ids the ledger knows that the box no longer has")
    accrued_cost: str | None = None
    idle_warning: str | None = None

    @model_validator(mode="after")
    def _whole_list(self) -> HostRuns:
        """Built without a total (one page that is the whole list): the total is its length."""
        if self.total < 0:
            self.total = len(self.runs)
        return self


def run_hosts(ledger: Ledger, inventory: Iterable[str]) -> list[str]:
    """Every host runs may be on: local, the inventory, and every host the ledger launched on."""
    return sorted({"local", *inventory, *(e.host for e in ledger.events("launch", limit=10000) if e.host)})


_RUNS_FOLLOW = "RGT-RUNS"


async def _clock_and_runs(host: Host, spec: HostSpec) -> tuple[float, list[Gpu], list[BoxRun]]:
    """The box's clock and GPUs (for ages and the idle-meter warning) and its runs, in one round
    trip: the clock script, then the run scan, in one shell."""
    clock = scripts.command_words("job_box_now", quote(",".join(Q_GPU_FIELDS)))
    res = await host.run(f"{clock}\necho {_RUNS_FOLLOW}\n{scan_script(spec)}", timeout=30)
    res.check("reading the box's clock, GPUs and runs")
    head, _, listing = res.text.partition(f"{_RUNS_FOLLOW}\n")
    now, gpus = 0.0, []
    for line in head.splitlines():
        key, _, value = line.partition("=")
        if key == "now":
            now = float(value)
        elif key == "gpu":
            gpus += parse_gpus(value)[0]
    return now, gpus, await scanned_runs(host, spec, listing)


def _summary(run: BoxRun, rec: RunRecordSummary, now: float, known: set[str]) -> RunSummary:
    state = run.state
    started = rec.started_at or run.started_at
    return RunSummary(
        run_id=run.run_id, name=rec.name or run.name, status=state.status, exit_code=state.exit_code,
        started_at_utc=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds") if started else None,
        command=(rec.command or "")[:200] or None, log_size=state.log_size,
        seconds_since_write=(now - state.log_mtime) if state.log_mtime else None, in_ledger=run.run_id in known,
        ended_at=None if state.status in LIVE else (state.ended_at or state.log_mtime),
        outputs=rec.outputs, output_dir=rec.output_dir, sync=state.sync,
        patrol=f"{run.patrol_last or '(no line yet)'} [{run.patrol_escalations} escalation(s): tail_logs shows them]"
        if run.patrol_last is not None or run.patrol_escalations else None,
    )


async def list_runs(host: Host, spec: HostSpec, ledger: Ledger, *, limit: int | None = None,
                    cursor: str | None = None, where: RunFilter | None = None) -> HostRuns:
    """One page of the box's runs (all of them when limit is None), newest first."""
    now, gpus, scanned = await _clock_and_runs(host, spec)
    matching = [r for r in scanned if where is None or where.keeps(r)]
    shown, next_cursor = page(matching, limit, cursor)
    records = await read_records(host, spec, [r.run_id for r in shown])
    launched = {e.run_id for e in ledger.events("launch", host=spec.name, limit=10000) if e.run_id}
    begun = {e.run_id for e in ledger.events("launch_begun", host=spec.name, limit=10000) if e.run_id}
    runs = [_summary(r, records.get(r.run_id, RunRecordSummary()), now, launched | begun) for r in shown]
    _record_transitions(ledger, spec, runs)
    live = sum(1 for r in scanned if r.state.status in LIVE)
    return HostRuns(host=spec.name, runs=runs, total=len(matching), next_cursor=next_cursor, live=live,
                    missing_on_box=sorted(launched - {r.run_id for r in scanned}),
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
            "(plan_teardown shows what stops billing) — nothing was stopped.")
