"""What the run tools answer for a Kubernetes host: launch's result, a log window with the run's
state and failure signatures, the namespace's runs. The log is the run's newest pod's log; byte
offsets count from its start, as for a run-dir log."""

from __future__ import annotations

import datetime as dt
import fnmatch
import time
from typing import Any

from lightkube.resources.core_v1 import PodLog

from mcp_server import untrusted
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.kube_api import api_errors
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines.kube.runs import (
    KubeHost,
    KubeRun,
    Launched,
    gone_state,
    remember_end,
    summary_fields,
)
from mcp_server.run.jobs.engines.kube.states import latest_pod
from mcp_server.run.jobs.launch import LaunchResult
from mcp_server.run.jobs.listing import HostRuns, RunSummary
from mcp_server.run.jobs.logs import MAX_WINDOW, TailResult, utf8_safe_len
from mcp_server.run.jobs.rundir import check_run_id
from mcp_server.run.jobs.runscan import RunFilter
from mcp_server.run.jobs.signatures import progress_hint, scan
from mcp_server.run.jobs.status import LIVE, RunState

# A log is read from its start (the API has no byte offset), at most this much per call: a
# window anywhere in the first LOG_CAP bytes is exact; past it, the tail comes from tailLines.
LOG_CAP = 8 * 1024 * 1024
SIGNATURE_TAIL = 64 * 1024
_TAIL_LINES_PAST_CAP = 2000


def launch_results(kh: KubeHost, launched: Launched, states: dict[str, RunState]) -> list[LaunchResult]:
    where = f"pod log of Job {launched.job} (namespace {launched.namespace})"
    return [LaunchResult(
        host=kh.spec.name, run_id=rid, name=None, outcome="already_running" if launched.existing else "queued",
        backend="kubernetes", run_dir="", log_path=where, state=states.get(rid) or RunState(status="queued"),
        log_tail="", signatures=[],
        notes=[f"Kubernetes Job {launched.job}" + (f", index {i}" if len(launched.run_ids) > 1 else "")
               + ": wait_for_run and tail_logs follow it; cancel_run deletes it"])
        for i, rid in enumerate(launched.run_ids)]


async def _log_bytes(kh: KubeHost, pod: str, *, limit: int | None = None, tail_lines: int | None = None) -> bytes:
    """The pod log's first `limit` bytes, or its last `tail_lines` lines (the API's limitBytes and
    tailLines; lightkube's log() has no limitBytes, so the request is built here)."""
    generic = kh.client._client  # lightkube's public log() cannot ask for limitBytes
    br = generic.prepare_request("get", PodLog, name=pod, namespace=kh.namespace,
                                 params={"limitBytes": limit, "tailLines": tail_lines})
    async with api_errors(kh.spec.name, f"reading the log of pod {pod}"):
        resp = await generic.send(generic.build_adapter_request(br))  # type: ignore[no-untyped-call]
        if resp.status_code == 400 and b"waiting to start" in resp.content:
            return b""
        generic.raise_for_status(resp)  # type: ignore[no-untyped-call]
    return bytes(resp.content)


async def tail(kh: KubeHost, run_id: str, *, redactor: Redactor, ledger: Ledger | None, offset: int | None,
               max_bytes: int, lines: int | None) -> TailResult:
    """A window of the run's log, with its state (the same paging contract as a run-dir log)."""
    check_run_id(run_id)
    if not 1 <= max_bytes <= MAX_WINDOW:
        raise InputError("max_bytes out of range", observed=max_bytes, expected=f"1..{MAX_WINDOW}")
    run = (await kh.runs()).get(run_id)
    state = run.state if run is not None else gone_state(ledger, kh.spec.name, run_id)
    remember_end(ledger, kh.spec.name, run_id, state)
    pod = latest_pod(run.pods) if run is not None else None
    pod_name = str((pod.get("metadata") or {}).get("name", "")) if pod else ""
    data, whole = b"", True
    if pod_name:
        try:
            data = await _log_bytes(kh, pod_name, limit=LOG_CAP if offset is None or offset + max_bytes <= LOG_CAP
                                    else offset + max_bytes)
        except NotFoundError:
            data = b""
        whole = len(data) < LOG_CAP or (offset is not None and len(data) < offset + max_bytes)
    size = len(data)
    if offset is None and not whole:  # past the cap: the last lines; the offset is then a lower bound
        tail_data = await _log_bytes(kh, pod_name, tail_lines=lines or _TAIL_LINES_PAST_CAP)
        data, size = tail_data, size
    start = max(0, size - max_bytes) if offset is None else min(offset, size)
    window = data[start:start + max_bytes] if offset is not None or whole else data[-max_bytes:]
    keep = utf8_safe_len(window) or len(window)
    window = window[:keep]
    if lines is not None:
        kept = b"".join(window.splitlines(keepends=True)[-lines:])
        start += len(window) - len(kept)
        window = kept
    text = redactor.scrub(untrusted.clean(window.decode("utf-8", "replace")))
    tail_text = redactor.scrub(data[-SIGNATURE_TAIL:].decode("utf-8", "replace"))
    next_offset = start + len(window)
    return TailResult(
        host=kh.spec.name, run_id=run_id, path=f"pod {pod_name or '(none yet)'} in namespace {kh.namespace}",
        state=state, text=text, offset=start, next_offset=next_offset, size=size, eof=next_offset >= size,
        truncated=next_offset < size, log_reset=offset is not None and offset > size and whole,
        last_write_utc=None, seconds_since_write=None, signatures=scan(tail_text),
        progress=progress_hint(tail_text))


def _keeps(where: RunFilter, run: KubeRun, status: str, started: float) -> bool:
    if where.states and status not in where.states:
        return False
    name = summary_fields(run).get("name") or run.run_id
    if where.name and not fnmatch.fnmatchcase(str(name), where.name):
        return False
    return where.since is None or started >= where.since


def _started(run: KubeRun) -> float:
    stamp = summary_fields(run).get("started_at_utc")
    if not stamp:
        return 0.0
    return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


async def list_kube_runs(kh: KubeHost, ledger: Ledger | None, *, limit: int, where: RunFilter | None) -> HostRuns:
    """The namespace's runs by the server's label, newest first, with the ledger reconciled."""
    runs = await kh.runs()
    where = where or RunFilter()
    rows: list[tuple[float, RunSummary]] = []
    live = 0
    for run in runs.values():
        state = run.state
        remember_end(ledger, kh.spec.name, run.run_id, state)
        live += state.status in LIVE
        started = _started(run)
        if not _keeps(where, run, state.status, started):
            continue
        fields: dict[str, Any] = summary_fields(run)
        rows.append((started, RunSummary(
            run_id=run.run_id, status=state.status, exit_code=state.exit_code, in_ledger=bool(
                ledger and ledger.events("launch", host=kh.spec.name, run_id=run.run_id, limit=1)),
            ended_at=state.ended_at, **fields)))
    rows.sort(key=lambda r: (r[0], r[1].run_id), reverse=True)
    known = {e.run_id for e in (ledger.events("launch", host=kh.spec.name, limit=10_000) if ledger else [])
             if e.run_id and e.ts > time.time() - 30 * 86_400}
    missing = sorted(r for r in known - set(runs) if r)
    return HostRuns(host=kh.spec.name, runs=[r for _, r in rows[:limit]], total=len(rows), live=live,
                    missing_on_box=missing[:50])


async def states_of(kh: KubeHost, run_ids: list[str]) -> dict[str, RunState]:
    runs = await kh.runs()
    return {r: runs[r].state for r in run_ids if r in runs}

