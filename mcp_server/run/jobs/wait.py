"""wait_for_run: block, for a bounded time, until a run changes state or ends.

Each poll is one round trip (tail_logs' script reading the state and the log's last line);
polls come every few seconds and a progress report at least every PROGRESS_EVERY_S. The wait
only reads: cancelling it (the client gives up, or the bound passes) never touches the run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field

from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.redact import Redactor
from mcp_server.run.jobs.logs import TailResult, tail_logs
from mcp_server.run.jobs.patrol_note import PatrolNote
from mcp_server.run.jobs.signatures import SignatureHit
from mcp_server.run.jobs.status import ENDED, RunState

DEFAULT_WAIT_S = 40.0
MAX_WAIT_S = 600.0
PROGRESS_EVERY_S = 10.0
POLL_S = 2.0
_LINE_CHARS = 300
_TAIL_BYTES = 8192

# progress(elapsed seconds, message)
Progress = Callable[[float, str], Awaitable[None]]


class WaitResult(BaseModel):
    host: str
    run_id: str
    ended: bool = Field(description="the run has ended: `state` is final")
    changed: bool = Field(description="the state differs from the one the wait began with")
    state: RunState
    status_at_start: str
    waited_s: float
    polls: int
    last_line: str | None = Field(description="the log's last line (secrets redacted)")
    log_offset: int = Field(description="the log's size now: tail_logs(offset=this) reads what comes next")
    signatures: list[SignatureHit] = Field(description="failure signatures in the log's tail")
    patrol: PatrolNote | None = Field(default=None, description="what an on-box patrol watching the run last wrote")
    message: str


def _last_line(tail: TailResult) -> str | None:
    lines = [ln for ln in tail.text.splitlines() if ln.strip()]
    return lines[-1][-_LINE_CHARS:] if lines else None


def wait_message(ended: bool, changed: bool, state: RunState, waited: float) -> str:
    if ended:
        code = f", exit code {state.exit_code}" if state.exit_code is not None else ""
        return f"the run has ended: {state.status}{code}"
    if changed:
        return f"the run's state changed to {state.status}: call again to keep waiting"
    return (f"still {state.status} after {waited:.0f} s: call again (same run_id) to keep waiting, "
            "or tail_logs with offset=log_offset for the new output")


async def wait_for_run(host: Host, spec: HostSpec, run_id: str, *, redactor: Redactor,
                       timeout_s: float = DEFAULT_WAIT_S, progress: Progress | None = None,
                       poll_s: float = POLL_S) -> WaitResult:
    """Poll the run until its state changes, it ends, or timeout_s passes."""

    async def poll() -> TailResult:
        return await tail_logs(host, spec, redactor=redactor, run_id=run_id, lines=1, max_bytes=_TAIL_BYTES)

    return await wait_on(spec.name, run_id, poll, timeout_s=timeout_s, progress=progress, poll_s=poll_s)


async def wait_on(host: str, run_id: str, poll: Callable[[], Awaitable[TailResult]], *, timeout_s: float,
                  progress: Progress | None, poll_s: float) -> WaitResult:
    """The wait itself, over any engine's one-line tail (`poll`): run dirs on a box, or a pod's log."""
    start = time.monotonic()
    tail = await poll()
    initial = tail.state or RunState(status="unknown")
    polls, last_report = 1, -PROGRESS_EVERY_S
    while True:
        state = tail.state or initial
        ended, changed = state.status in ENDED, state.status != initial.status
        waited = time.monotonic() - start
        if ended or changed or waited >= timeout_s:
            break
        if progress is not None and waited - last_report >= PROGRESS_EVERY_S:
            last_report = waited
            await progress(waited, f"{state.status}, {waited:.0f} s: {_last_line(tail) or '(no output yet)'}")
        await asyncio.sleep(min(poll_s, max(0.0, timeout_s - waited)))
        tail, polls = await poll(), polls + 1
    return WaitResult(host=host, run_id=run_id, ended=ended, changed=changed, state=state,
                      status_at_start=initial.status, waited_s=round(waited, 2), polls=polls,
                      last_line=_last_line(tail), log_offset=tail.size, signatures=tail.signatures, patrol=tail.patrol,
                      message=wait_message(ended, changed, state, waited))
