"""Is a run still going? One answer for the tools that must not act on a live run
(verify_artifacts): the run's record says which engine, the engine says its state."""

from __future__ import annotations

from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.rundir import read_run_record, run_dir_path
from mcp_server.run.jobs.status import LIVE, RunState


async def live_state(host: Host, spec: HostSpec, run_id: str) -> RunState | None:
    """The run's state when it is running or queued; None when it has ended or is not a run of
    this box (a run id used only as a label, or a run.json written by hand)."""
    try:
        record = await read_run_record(host, spec.durable_root, run_id)
    except (NotFoundError, InputError):
        return None
    (state,) = await ENGINES[record.backend].status(host, [run_dir_path(spec.durable_root, run_id)])
    return state if state.status in LIVE else None
