"""An on-box queue: several commands for one host, at most K running at once.

The server cannot wait for jobs, so the queue runner itself is a detached process on the
box (runs/queue-<id>/queue.sh, from scripts/job_queue_runner.sh). Every command gets its own
run dir and wrapper with the same contract as launch_detached; a child waiting its turn has
status `queued`. Cells are numbered from 1 in the order given (`<name>3-...` is cell 3); a
sweep that died at cell k restarts with the same commands and start_index=k, and cells 1..k-1
are not run again. The launch's disk floor (min_free_gib, min_free_inodes) is checked again
before each cell starts: below it the cell is held (its `held` file and log say why) until space
is freed. A sweep in a push_code snapshot gives every cell its own <cell run dir>/work (the
snapshot's entries linked in, as a single launch's): what a cell writes by relative path lands
there, its output_dir, and the sealed snapshot is never written."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.launch import (
    LaunchRequest,
    check_request,
    choose_backend,
    make_record,
    outcome_unknown,
    refuse_unwritten,
    secret_values,
)
from mcp_server.run.jobs.launch_facts import read_facts
from mcp_server.run.jobs.launch_start import file_text, on_exit_text, record_text
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import Backend, RunRecord, new_run_id, work_dir_path
from mcp_server.run.jobs.status import STATE_FUNCS, RunState, parse_state
from mcp_server.run.jobs.wrapper import env_script, run_dirs, secrets_payload, wrapper_text

Cell = tuple[int, str, str]  # index from 1, run id, command


class QueuedRun(BaseModel):
    index: int = Field(description="cell number in `commands`, from 1")
    run_id: str
    command: str
    state: RunState
    output_dir: str | None = Field(default=None, description="where the cell writes by relative path")


class QueueResult(BaseModel):
    host: str
    queue_id: str
    queue_dir: str
    max_concurrent: int
    start_index: int
    runs: list[QueuedRun] = Field(description="one per cell run, in queue order")
    backend: str = Field(default="shell", description="shell: the on-box queue; slurm: job arrays")


def _start_script(spec: HostSpec, req: LaunchRequest, facts: dict[str, str], queue_dir: str, max_concurrent: int,
                  records: list[RunRecord]) -> str:
    """scripts/job_queue_start.sh with the queue's and every child's files as arguments."""
    args = [queue_dir, str(int(max_concurrent)), f"{min(req.probe_s, 20):g}",
            STATE_FUNCS + scripts.load("job_queue_runner"), facts["workdir"], linked_flag(facts),
            cell_env(spec, req, facts), wrapper_text(),
            f"{int(req.min_free_gib * 2**20)} {int(req.min_free_inodes)}", on_exit_text(req)]
    args += cell_files(records)
    libraries = (STATE_FUNCS, scripts.load("job_run_files"), scripts.load("job_launch_lib"))
    return job_script("job_queue_start", *map(quote, args), libraries=libraries)


# What a cell's env.sh says for its run dir: the wrapper exports RGT_RUN_DIR (that cell's) before
# it reads env.sh, so one file, shared by every cell of the sweep, names each cell's own dirs.
_CELL_RUN_DIR = '"$RGT_RUN_DIR"'


def cell_env(spec: HostSpec, req: LaunchRequest, facts: dict[str, str]) -> str:
    """env.sh of every cell: a single launch's, RGT_CODE_DIR and RGT_OUTPUT_DIR (and, in a
    snapshot, PYTHONPYCACHEPREFIX) taken from the cell's run dir; a name the user set wins."""
    output_dir = work_dir_path(_CELL_RUN_DIR) if facts.get("snapshot") else None
    dirs = run_dirs(facts["workdir"], output_dir, _CELL_RUN_DIR)
    lines = [f"export {k}={v if v.startswith(_CELL_RUN_DIR) else quote(v)}\n"
             for k, v in dirs.items() if k not in req.env]
    return env_script(req.env, spec.profile.proxy_hook) + "".join(lines)


def linked_flag(facts: dict[str, str]) -> str:
    """1: every cell works in its own <run dir>/work, the snapshot's entries linked in (run_cwd)."""
    return "1" if facts.get("snapshot") else "0"


def cell_records(spec: HostSpec, req: LaunchRequest, facts: dict[str, str], children: list[Cell], backend: Backend,
                 secret_names: list[str], queue_id: str) -> list[RunRecord]:
    """Each cell's run.json, in cell order."""
    return [make_record(spec, req, facts, run_id, backend, secret_names, command, queue_id=queue_id)
            for _, run_id, command in children]


def cell_files(records: list[RunRecord]) -> list[str]:
    """Per cell, the start scripts' arguments: run id, run.json, cmd.sh, sync_spec ("" for none)."""
    out = []
    for record in records:
        out += [record.run_id, record_text(record), file_text(record.command),
                record.sync.spec_text() if record.sync else ""]
    return out


def record_cells(ledger: Ledger | None, spec: HostSpec, records: list[RunRecord], queue_id: str,
                 summary: str) -> None:
    """One `launch` event per cell in the ledger, with what verify_artifacts reads of a launch:
    the declared outputs and the cell's output_dir."""
    if ledger is None:
        return
    for r in records:
        ledger.record("launch", host=spec.name, run_id=r.run_id, summary=summary,
                      data={"queue_id": queue_id, "command": r.command, "backend": r.backend,
                            "secret_env_names": r.secret_env_names, "durable_root": spec.durable_root,
                            "outputs": r.outputs.model_dump() if r.outputs else None,
                            "output_dir": r.output_dir, "code_snapshot": r.code_snapshot})


def cells(commands: list[str], start_index: int, name: str | None) -> list[Cell]:
    """(index, run id, command) of every cell from start_index on."""
    if not 1 <= start_index <= len(commands):
        raise InputError("start_index is not a cell of this queue", observed=start_index,
                         expected=f"1..{len(commands)} (cells are numbered from 1 in the order of `commands`)",
                         next_step="pass the same commands as the first launch and the number of the first cell "
                         "to run again")
    return [(i, new_run_id(f"{name or 'q'}{i}"), cmd) for i, cmd in enumerate(commands, 1) if i >= start_index]


async def prepare_sweep(host: Host, spec: HostSpec, commands: list[str], start_index: int, req: LaunchRequest,
                        redactor: Redactor, backend: Backend) -> tuple[list[Cell], dict[str, str], dict[str, str], str]:
    """Before a sweep touches the box: its cells, secrets, the launch facts (disk gate included)
    and its id (`queue-...` on a box, `array-...` on Slurm)."""
    check_request(req)
    children = cells(commands, start_index, req.name)
    secrets = secret_values(req.secret_env, os.environ, redactor)
    facts = await read_facts(host, spec, req.model_copy(update={"name": None}))
    choose_backend(req.model_copy(update={"backend": backend}), facts, spec)
    return children, secrets, facts, ("array-" if backend == "slurm" else "queue-") + new_run_id(req.name)


async def launch_queue(host: Host, spec: HostSpec, commands: list[str], max_concurrent: int,
                       req: LaunchRequest, *, ledger: Ledger | None, redactor: Redactor,
                       start_index: int = 1) -> QueueResult:
    """Queue `commands` from cell `start_index` (from 1) on one box; the first `max_concurrent` start at once."""
    children, secrets, facts, queue_id = await prepare_sweep(host, spec, commands, start_index, req, redactor, "shell")
    queue_dir = f"{facts['base']}/runs/{queue_id}"
    records = cell_records(spec, req, facts, children, "shell", list(secrets), queue_id)
    script = _start_script(spec, req, facts, queue_dir, max_concurrent, records)
    async with outcome_unknown(spec, f"queue {queue_id}"):
        res = await host.run(script, stdin=secrets_payload(secrets), timeout=req.probe_s + 30, slow=req.probe_s > 1)
    refuse_unwritten(spec, res.text)
    res.check("starting the queue")
    states = parse_kv(res.text)
    runs = [QueuedRun(index=i, run_id=rid, command=redactor.scrub(cmd)[:200], output_dir=r.output_dir,
                      state=parse_state(states.get(f"state.{rid}", "")))
            for (i, rid, cmd), r in zip(children, records, strict=True)]
    record_cells(ledger, spec, records, queue_id, f"queued in {queue_id}")
    return QueueResult(host=spec.name, queue_id=queue_id, queue_dir=queue_dir, max_concurrent=max_concurrent,
                       start_index=start_index, runs=runs)
