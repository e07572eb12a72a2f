"""cancel_run: stop a live run through the engine that started it, and say why it stopped.

Four round trips: the run's record (which engine), its state (an ended run is left alone),
the `cancelled` file in its run dir (who, when, why; written atomically before anything is
signalled, so the run reads `cancelled` the moment it stops), the engine's cancel (an optional
first signal, TERM, grace, KILL), then its state again. The ledger gets a `cancel` event."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.engines.base import DEFAULT_GRACE_S
from mcp_server.run.jobs.rundir import RunStatus, read_run_record, run_dir_path
from mcp_server.run.jobs.status import ENDED, RunState

MAX_GRACE_S = 15.0
FirstSignal = Literal["USR1", "USR2", "INT", "HUP"]
_NO_RUN_DIR = 3  # job_cancel_mark.sh: the run dir does not exist


class CancelRecord(BaseModel):
    """The run dir's `cancelled` file."""

    schema_: str = Field(default="remote-gpu-trainer/cancel/v1", alias="schema")
    run_id: str
    by: str = Field(description="who asked: the MCP client and the server's user")
    at: float
    at_utc: str
    reason: str | None = None
    signal_first: str | None = None
    grace_s: float


class CancelResult(BaseModel):
    host: str
    run_id: str
    changed: bool = Field(description="false: the run had already ended and nothing was done")
    status_before: RunStatus
    state: RunState = Field(description="the run's state after the cancel")
    message: str
    record: CancelRecord | None = Field(default=None, description="what was written to the run dir's `cancelled`")


def _ended(spec: HostSpec, run_id: str, state: RunState) -> CancelResult:
    code = f" (exit code {state.exit_code})" if state.exit_code is not None else ""
    return CancelResult(host=spec.name, run_id=run_id, changed=False, status_before=state.status, state=state,
                        message=f"the run had already ended: {state.status}{code}; nothing was changed")


async def _mark(host: Host, run_dir: str, record: CancelRecord) -> None:
    text = record.model_dump_json(by_alias=True)
    res = await host.run(scripts.command_words("job_cancel_mark", path_word(run_dir, "run dir"), quote(text)),
                         timeout=20)
    if res.exit_status == _NO_RUN_DIR:
        raise NotFoundError("no such run dir on this box", host=host.name, path=run_dir,
                            next_step="list_runs shows the runs on the box")
    res.check("recording the cancel in the run dir")


def cancel_record(run_id: str, by: str, reason: str | None, signal_first: FirstSignal | None,
                  grace_s: float) -> CancelRecord:
    """What the run dir's `cancelled` file will say: who, when, why, how."""
    now = time.time()
    return CancelRecord(run_id=run_id, by=by or "unknown", at=now, reason=reason, signal_first=signal_first,
                        at_utc=datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
                        grace_s=min(max(grace_s, 0.1), MAX_GRACE_S))


async def cancel_run(host: Host, spec: HostSpec, run_id: str, *, by: str = "", reason: str | None = None,
                     signal_first: FirstSignal | None = None, grace_s: float = DEFAULT_GRACE_S,
                     ledger: Ledger | None = None) -> CancelResult:
    """Stop a live run's whole process group (signal_first, TERM, grace, KILL) and record why;
    an ended run is reported as it is and left untouched."""
    record = await read_run_record(host, spec.durable_root, run_id)
    engine = ENGINES[record.backend]
    run_dir = run_dir_path(spec.durable_root, run_id)
    (before,) = await engine.status(host, [run_dir])
    if before.status in ENDED:
        return _ended(spec, run_id, before)
    mark = cancel_record(run_id, by, reason, signal_first, grace_s)
    await _mark(host, run_dir, mark)
    await engine.cancel(host, run_dir, signal_first=signal_first, grace_s=mark.grace_s)
    (after,) = await engine.status(host, [run_dir])
    if ledger is not None:
        ledger.record("cancel", host=spec.name, run_id=run_id, summary=f"cancelled ({before.status} -> {after.status})",
                      data={"by": mark.by, "reason": reason, "signal_first": signal_first, "grace_s": mark.grace_s,
                            "status_before": before.status, "status_after": after.status})
    stopped = after.status == "cancelled"
    message = ("stopped: the run reads cancelled" if stopped else
               f"the cancel was sent but the run reads {after.status}: check again with tail_logs")
    return CancelResult(host=spec.name, run_id=run_id, changed=True, status_before=before.status, state=after,
                        message=message, record=mark)
