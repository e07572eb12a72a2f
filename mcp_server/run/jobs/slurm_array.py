"""A sweep on Slurm: `commands` on a Slurm host become ONE job array (`--array=0-N%K`), not N
submissions and not the on-box queue: Slurm keeps at most K cells running and schedules the rest.
Every cell gets its own run dir (run id, log, exit code, the same contract as a single launch)
whose `slurm_job_id` is its array task (`<array job id>_<index>`). MaxArraySize bounds the largest
index, so a longer sweep is split into chunks that run one after another (afterany): never more
than K cells at once (scripts/job_slurm_array_start.sh). In a push_code snapshot each cell works
in its own <cell run dir>/work, as a queued cell does (queue.py)."""

from __future__ import annotations

from mcp_server import scripts
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.engines.slurm import sbatch_function, submit_refusal
from mcp_server.run.jobs.launch import LaunchRequest, outcome_unknown, refuse_unwritten
from mcp_server.run.jobs.launch_start import on_exit_text
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.queue import (
    QueuedRun,
    QueueResult,
    cell_env,
    cell_files,
    cell_records,
    linked_flag,
    prepare_sweep,
    record_cells,
)
from mcp_server.run.jobs.rundir import RunRecord
from mcp_server.run.jobs.status import STATE_FUNCS
from mcp_server.run.jobs.wrapper import secrets_payload, wrapper_text

_REFUSED = "RGT-SUBMIT-FAILED sbatch: "


def _start_script(spec: HostSpec, req: LaunchRequest, facts: dict[str, str], array_dir: str, max_concurrent: int,
                  records: list[RunRecord]) -> str:
    array_id = array_dir.rsplit("/", 1)[1]
    engine = ENGINES["slurm"]
    args = [array_dir, str(int(max_concurrent)), engine.job_name(array_id) or array_id, facts["workdir"],
            linked_flag(facts), cell_env(spec, req, facts), wrapper_text(), on_exit_text(req)]
    args += cell_files(records)
    libraries = (STATE_FUNCS, scripts.load("job_run_files"), scripts.load("job_launch_lib"), engine.submit_functions(),
                 sbatch_function((spec.slurm or SlurmOptions()).merged(req.slurm)))
    return job_script("job_slurm_array_start", *map(quote, args), libraries=libraries)


async def launch_array(host: Host, spec: HostSpec, commands: list[str], max_concurrent: int, req: LaunchRequest, *,
                       ledger: Ledger | None, redactor: Redactor, start_index: int = 1) -> QueueResult:
    """Submit `commands` from cell `start_index` (from 1) as job arrays on a Slurm login node."""
    children, secrets, facts, array_id = await prepare_sweep(host, spec, commands, start_index, req, redactor,
                                                             "slurm")
    array_dir = f"{facts['base']}/runs/{array_id}"
    records = cell_records(spec, req, facts, children, "slurm", list(secrets), array_id)
    script = _start_script(spec, req, facts, array_dir, max_concurrent, records)
    async with outcome_unknown(spec, f"Slurm array {array_id}"):
        res = await host.run(script, stdin=secrets_payload(secrets), timeout=60)
    refuse_unwritten(spec, res.text)
    refused = next((ln for ln in res.text.splitlines() if ln.startswith(_REFUSED)), None)
    if refused:
        raise submit_refusal(spec.name, redactor.scrub(refused.removeprefix(_REFUSED)))
    res.check("submitting the job array")
    states = await ENGINES["slurm"].status(host, [f"{facts['base']}/runs/{rid}" for _, rid, _ in children])
    runs = [QueuedRun(index=i, run_id=rid, command=redactor.scrub(cmd)[:200], state=state, output_dir=r.output_dir)
            for (i, rid, cmd), state, r in zip(children, states, records, strict=True)]
    record_cells(ledger, spec, records, array_id, f"task of Slurm array {array_id}")
    return QueueResult(host=spec.name, queue_id=array_id, queue_dir=array_dir, max_concurrent=max_concurrent,
                       start_index=start_index, runs=runs, backend="slurm")
