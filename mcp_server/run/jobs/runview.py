"""One run as a resource reads it: its state, exit code, last log line, failure signatures,
elapsed time and cost so far (runs://{host}/{run_id}), and the bounded log tail
(runs://{host}/{run_id}/log). Two round trips: the tail with the state, then run.json."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.redact import Redactor
from mcp_server.run.jobs.logs import TailResult, tail_logs
from mcp_server.run.jobs.patrol_note import PatrolNote
from mcp_server.run.jobs.rundir import RunRecord, read_run_record
from mcp_server.run.jobs.signatures import SignatureHit
from mcp_server.run.jobs.status import LIVE, RunState

LOG_TAIL_BYTES = 64 * 1024
_LAST_LINE_CUT = 500


class RunView(BaseModel):
    host: str
    run_id: str
    name: str | None
    state: RunState
    exit_code: int | None
    last_line: str | None = Field(description="the log's last non-empty line (secrets masked)")
    progress: str | None
    signatures: list[SignatureHit]
    started_at_utc: str | None
    elapsed_s: float | None = Field(description="from start to its end, or to now while it runs")
    cost_so_far: str | None = Field(description="elapsed time at the box's hourly price, when the box has one")
    log_bytes: int
    log_uri: str
    patrol: PatrolNote | None = Field(default=None, description="what an on-box patrol watching the run last wrote")


def last_line(text: str) -> str | None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-_LAST_LINE_CUT:] if lines else None


async def read_log(host: Host, spec: HostSpec, run_id: str, redactor: Redactor) -> TailResult:
    return await tail_logs(host, spec, redactor=redactor, run_id=run_id, max_bytes=LOG_TAIL_BYTES)


def _cost(spec: HostSpec, elapsed: float | None) -> str | None:
    if elapsed is None or spec.hourly_price is None or not spec.profile.billed:
        return None
    hours = elapsed / 3600
    return f"{hours * spec.hourly_price:.2f} {spec.currency} over {hours:.2f} h at {spec.hourly_price:.2f}/h"


async def run_view(host: Host, spec: HostSpec, run_id: str, redactor: Redactor, uri_host: str) -> RunView:
    tail = await tail_logs(host, spec, redactor=redactor, run_id=run_id, max_bytes=8192)
    state = tail.state or RunState(status="unknown")
    record: RunRecord | None = None
    with contextlib.suppress(RgtError):  # a hand-written run.json still has a state and a log
        record = await read_run_record(host, spec.durable_root, run_id)
    started = record.started_at if record else None
    end = state.ended_at if state.ended_at else (time.time() if state.status in LIVE else None)
    elapsed = max(0.0, end - started) if started and end else None
    return RunView(
        host=spec.name, run_id=run_id, name=record.name if record else None, state=state, exit_code=state.exit_code,
        last_line=last_line(tail.text), progress=tail.progress, signatures=tail.signatures,
        started_at_utc=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds") if started else None,
        elapsed_s=elapsed, cost_so_far=_cost(spec, elapsed), log_bytes=tail.size,
        log_uri=f"runs://{uri_host}/{run_id}/log", patrol=tail.patrol)
