"""capsule action trackers: read one tracker source (W&B offline runs, an MLflow store, TensorBoard
logs) and hold its runs against this server's jobs. A job's state comes from its box (list_runs on
each host the ledger launched one of those run ids on, bounded); a box that does not answer leaves
its jobs "unknown", which the forensics never call ended."""

from __future__ import annotations

import asyncio
import logging

from pydantic import BaseModel

from mcp_server.app import App
from mcp_server.deliver.trackers import forensics, sources
from mcp_server.deliver.trackers.models import TrackerReport, TrackerRun

log = logging.getLogger(__name__)

HOST_BOUND_S = 10.0
MAX_HOSTS = 8


class TrackersResult(BaseModel):
    backend: str
    source: str
    found: int
    cut: bool
    notes: list[str]
    runs: list[TrackerRun]
    report: TrackerReport


async def _states_on(app: App, host: str, run_ids: set[str]) -> dict[str, str]:
    from mcp_server.run.jobs.listing import list_runs

    try:
        spec = app.pool.spec(host)
        box = await app.pool.host(spec)
        listed = await asyncio.wait_for(list_runs(box, spec, app.ledger), HOST_BOUND_S)
    except Exception as exc:  # a box that does not answer: its jobs stay unknown, never "ended"
        log.info("trackers: job states on %s unknown (%s)", host, exc)
        return dict.fromkeys(run_ids, "unknown")
    found = {r.run_id: str(r.status) for r in listed.runs if r.run_id in run_ids}
    return {rid: found.get(rid, "unknown") for rid in run_ids}


async def job_states(app: App, run_ids: set[str]) -> dict[str, str]:
    """This server's jobs among `run_ids` (run id -> state); ids the ledger never launched are absent."""
    hosts: dict[str, set[str]] = {}
    for rid in run_ids:
        event = app.ledger.latest("launch", run_id=rid) or app.ledger.latest("launch_begun", run_id=rid)
        if event is not None and event.host:
            hosts.setdefault(event.host, set()).add(rid)
    found = await asyncio.gather(*(_states_on(app, h, ids) for h, ids in list(hosts.items())[:MAX_HOSTS]))
    return {rid: state for states in found for rid, state in states.items()}


async def tracker_report(app: App, source: str) -> TrackersResult:
    read = await asyncio.to_thread(sources.read_source, source)  # mlflow and wandb import for seconds
    jobs = await job_states(app, {r.rgt_run_id for r in read.runs if r.rgt_run_id})
    return TrackersResult(backend=read.backend, source=read.source, found=read.found, cut=read.cut,
                          notes=read.notes, runs=read.runs, report=forensics.tracker_report(read.runs, jobs))
