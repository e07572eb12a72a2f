"""cancel_run on a Slurm sweep's id (`array-...`, the queue_id launch_detached returned): every
job array of the sweep stops at once (scancel --signal=TERM --full, grace, scancel), and every
cell still queued or running reads `cancelled`; cells that had already ended keep their result.
Four round trips: the cells, their state, the records + scancel, their state again."""

from __future__ import annotations

from mcp_server import scripts
from mcp_server.errors import NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.jobs.cancel import CancelRecord, CancelResult, FirstSignal
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.engines.slurm import SlurmEngine
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import run_dir_path
from mcp_server.run.jobs.status import ENDED, RunState

_NO_ARRAY = 3  # job_slurm_cancel_array.sh: no such array dir


def is_array_id(run_id: str) -> bool:
    return run_id.startswith("array-")


async def _cells(host: Host, array_dir: str) -> list[str]:
    res = await host.run(scripts.command_words("job_slurm_array_cells", path_word(array_dir, "array dir")), timeout=20)
    res.check("listing the sweep's cells")
    return [line for line in res.text.splitlines() if line.startswith("/")]


async def cancel_array(host: Host, spec: HostSpec, array_id: str, mark: CancelRecord, *,
                       signal_first: FirstSignal | None, ledger: Ledger | None) -> CancelResult:
    """Stop every job array of the sweep `array_id` and record why in its live cells."""
    array_dir = run_dir_path(spec.durable_root, array_id)
    cells = await _cells(host, array_dir)
    if not cells:
        raise NotFoundError("no such Slurm sweep on this box", host=spec.name, path=array_dir,
                            next_step="pass the queue_id launch_detached returned for the sweep, or one cell's run id")
    engine = ENGINES["slurm"]
    before = await engine.status(host, cells)
    live = [d for d, s in zip(cells, before, strict=True) if s.status not in ENDED]
    script = job_script("job_slurm_cancel_array", path_word(array_dir, "array dir"),
                        quote(mark.model_dump_json(by_alias=True)), quote(signal_first or ""),
                        quote(str(max(1, round(mark.grace_s * 10)))), *(path_word(d, "run dir") for d in live),
                        libraries=(scripts.load(SlurmEngine.library),))
    res = await host.run(script, timeout=2 * mark.grace_s + 40, slow=True)
    if res.exit_status == _NO_ARRAY:
        raise NotFoundError("no job arrays are recorded for this sweep", host=spec.name, path=array_dir)
    res.check("cancelling the sweep")
    after = await engine.status(host, cells)
    counts: dict[str, int] = {}
    for s in after:
        counts[s.status] = counts.get(s.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if ledger is not None:
        ledger.record("cancel", host=spec.name, run_id=array_id, summary=f"sweep cancelled: {summary}",
                      data={"by": mark.by, "reason": mark.reason, "cells": len(cells), "live_before": len(live)})
    stopped = not any(s.status in ("queued", "running") for s in after)
    if not live:
        message = "every cell had already ended; nothing was changed"
    elif stopped:
        message = (f"stopped the sweep's {len(live)} live cell(s); the {len(cells) - len(live)} that had ended keep "
                   f"their result ({summary})")
    else:
        message = f"the cancel was sent but some cells still read live ({summary}): check again with list_runs"
    return CancelResult(
        host=spec.name, run_id=array_id, changed=bool(live), status_before="running" if live else before[0].status,
        state=RunState(status="cancelled" if live and stopped else after[0].status,
                       evidence=[f"{len(cells)} cells: {summary}"]),
        record=mark if live else None, message=message)
