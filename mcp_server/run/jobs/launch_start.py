"""The launch's start on the box (scripts/job_launch_start.sh): the run's files as its arguments,
and the record's git state filled in by the box itself, so a launch on remembered facts needs no
round trip before it (launch_facts.py)."""

from __future__ import annotations

import json

from mcp_server import scripts
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.run.jobs.engines.base import JobEngine
from mcp_server.run.jobs.engines.slurm import sbatch_function
from mcp_server.run.jobs.launch_facts import asked_workdir, gate_floors
from mcp_server.run.jobs.launch_request import LaunchRequest
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import RunRecord
from mcp_server.run.jobs.status import STATE_FUNCS
from mcp_server.run.jobs.wrapper import env_script, run_dirs, wrapper_text

LOG_TAIL_BYTES = 8192


def file_text(text: str) -> str:
    """A run file's content as written on the box: always ending in a newline."""
    return text if text.endswith("\n") else text + "\n"


def on_exit_text(req: LaunchRequest) -> str:
    """on_exit.sh: the launch's on_exit command ("" when none: no file)."""
    return file_text(req.on_exit) if req.on_exit and req.on_exit.strip() else ""


def record_text(record: RunRecord) -> str:
    return file_text(record.model_dump_json(by_alias=True, indent=2))


def box_record_text(record: RunRecord, fill_git: bool) -> str:
    """run.json as sent. With `fill_git` it stops where the git state goes, last: the box appends
    its answer and the closing brace (a plain concatenation, whatever the size of the record)."""
    if not fill_git:
        return record_text(record)
    data = json.loads(record.model_dump_json(by_alias=True))
    del data["git_commit"], data["git_dirty"]
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return text[: text.rindex("}")].rstrip() + ',\n  "git_commit": '


def fills_git(record: RunRecord) -> bool:
    """A push_code snapshot's provenance is fixed; a plain workdir's git state is read as it starts."""
    return record.code_snapshot is None


def with_box_git(record: RunRecord, text: str) -> RunRecord:
    """The record as the box wrote it: the git state the start printed (JSON tokens) filled in."""
    said = dict(ln.partition("=")[::2] for ln in text.partition("RGT-LOG\n")[0].splitlines() if "=" in ln)
    if not fills_git(record) or "git_commit" not in said:
        return record
    try:
        commit, dirty = json.loads(said["git_commit"]), json.loads(said.get("git_dirty", "null"))
    except ValueError:
        commit, dirty = None, None
    return record.model_copy(update={"git_commit": commit if isinstance(commit, str) else None,
                                     "git_dirty": dirty if isinstance(dirty, bool) else None})


def start_script(spec: HostSpec, req: LaunchRequest, engine: JobEngine, record: RunRecord, base: str,
                 assumed: bool) -> str:
    """The start with the run's files as arguments; `assumed`: the facts were remembered, so the box
    checks the workdir still resolves to the record's path. A run whose output_dir is not its
    workdir (a snapshot's) gets that dir made, the workdir's entries linked in."""
    fill = fills_git(record)
    head = [base, record.run_id, req.name or "", "1" if req.relaunch else "0", str(int(req.probe_s / 0.2)),
            str(LOG_TAIL_BYTES), engine.job_name(record.run_id) or "", "1" if fill else "0", "1" if assumed else "0"]
    asked = [path_word(spec.durable_root, "durable root"), path_word(asked_workdir(spec, req), "workdir")]
    dirs = run_dirs(record.workdir, record.output_dir, f"{base}/runs/{record.run_id}")
    env = env_script(req.env, spec.profile.proxy_hook, dirs)
    tail = [*gate_floors(req), record.workdir, record.output_dir or record.workdir, box_record_text(record, fill),
            file_text(record.command), env, wrapper_text(),
            record.sync.spec_text() if record.sync else "", on_exit_text(req)]
    libraries: tuple[str, ...] = (STATE_FUNCS, scripts.load("job_run_files"), scripts.load("job_launch_lib"),
                                  engine.submit_functions())
    if engine.name == "slurm":
        libraries += (sbatch_function((spec.slurm or SlurmOptions()).merged(req.slurm)),)
    return job_script("job_launch_start", *map(quote, head), *asked, *map(quote, tail), libraries=libraries)
