"""Cancel a run through the engine that started it (the cancel_run tool comes later)."""

from __future__ import annotations

from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.rundir import read_run_record, run_dir_path
from mcp_server.run.jobs.status import RunState


async def cancel_run(host: Host, spec: HostSpec, run_id: str) -> RunState:
    """Stop the run's whole process group (TERM, grace, KILL) and return the state it reads as after."""
    record = await read_run_record(host, spec.durable_root, run_id)
    engine = ENGINES[record.backend]
    run_dir = run_dir_path(spec.durable_root, run_id)
    await engine.cancel(host, run_dir)
    (state,) = await engine.status(host, [run_dir])
    return state
