"""The run directory on the box: the source of truth for a detached job.

<durable_root>/.rgt/
  runs/<run_id>/   run.json  wrapper.sh  cmd.sh  env.sh  workdir  log  pid  boot_id  oom_base
                   exit_code  ended_at  (both written by the wrapper, tmp + rename)
                   sync_spec  (sync_to_durable asked: source root, destination, globs)
                   sync_status  sync_files  (the copy's outcome and its files, before exit_code)
                   cancelled  (cancel_run: who, when, why; written before the engine stops it)
                   held  (a queued cell the disk floor holds back: why; removed when it starts)
                   work/  (a run in a push_code snapshot: its working directory, symlinks to the
                          snapshot's top-level entries; what the run writes by relative path lands here)
                   pycache/  (the same run: Python's bytecode cache, kept out of the snapshot)
  names/<name>     the run id last launched under that name
  locks/<name>/    held while a launch of that name is in progress (mkdir is atomic)
<durable_root>/results/<run_id>/   what sync_to_durable copied, by path under the source root
<durable_root>/results/<name>/<cell>/   what aggregate_results collected from a sweep's cells
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server import scripts
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word
from mcp_server.limits import PATH_MAX
from mcp_server.run.jobs.sync import RunSync

RunStatus = Literal["queued", "running", "orphaned", "succeeded", "failed", "sync_failed", "cancelled", "lost",
                    "unknown"]
Backend = Literal["shell", "tmux", "slurm"]
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def new_run_id(name: str | None, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now or time.time()))
    return f"{name or 'run'}-{stamp}-{secrets.token_hex(3)}"


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID_RE.match(run_id) or ".." in run_id:
        raise InputError("run_id is not a valid run id", observed=run_id,
                         expected="the run_id returned by launch_detached or list_runs")
    return run_id


def runs_dir_path(durable_root: str) -> str:
    """The box path (absolute or ~/...) of the dir that holds every run dir."""
    return f"{durable_root.rstrip('/')}/.rgt/runs"


def run_dir_path(durable_root: str, run_id: str) -> str:
    """The box path of one run's dir, as shown to the user and passed to engines."""
    return f"{runs_dir_path(durable_root)}/{run_id}"


def work_dir_path(run_dir: str) -> str:
    """A snapshot run's working directory: the code is linked in, its outputs land there, and the
    sealed snapshot is never written."""
    return f"{run_dir}/work"


class RunOutputs(BaseModel):
    """What the run must produce: the roster verify_artifacts and teardown check."""

    root: str
    patterns: list[str]


class RunRecord(BaseModel):
    """run.json: what was launched, where, by whom, from which code."""

    schema_: str = Field(default="remote-gpu-trainer/run/v1", alias="schema")
    run_id: str
    name: str | None
    host: str
    backend: Backend
    command: str
    workdir: str
    env: dict[str, str] = Field(description="non-secret variables set for the job")
    secret_env_names: list[str] = Field(description="names only; values never written anywhere")
    started_at: float
    started_at_utc: str
    user: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    git_branch: str | None = None
    code_snapshot: str | None = Field(default=None, description="the push_code snapshot id the run's workdir is")
    output_dir: str | None = Field(default=None, description="the run's working directory: where what it writes by "
                                   "relative path lands (a snapshot run's own <run dir>/work)")
    rerun_of: str | None = Field(default=None, description="the run this one repeats with the identical config")
    host_facts: dict[str, str] = Field(default_factory=dict)
    queue_id: str | None = None
    outputs: RunOutputs | None = None
    sync: RunSync | None = None
    server_version: str

    model_config = ConfigDict(populate_by_name=True)


class RunRecordSummary(BaseModel):
    """What list_runs and tail_logs read from any run.json, also one written by hand or by
    another version: every field optional; a file that does not parse reads as empty."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    command: str | None = None
    started_at: float | None = None
    secret_env_names: list[str] = Field(default_factory=list)
    outputs: RunOutputs | None = None
    output_dir: str | None = Field(default=None, max_length=PATH_MAX)  # a longer one is no path: dropped
    backend: str | None = None

    @classmethod
    def from_base64(cls, text: str) -> RunRecordSummary:
        """run.json as base64; a field with the wrong shape reads as missing, the others stay."""
        try:
            return cls.from_json(base64.b64decode(text))
        except (ValueError, binascii.Error):
            return cls()

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecordSummary:
        """run.json's text; a field with the wrong shape reads as missing, the others stay."""
        try:
            data = json.loads(text)
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            wrong = {e["loc"][0] for e in exc.errors() if e["loc"]}
            return cls.model_validate({k: v for k, v in data.items() if k not in wrong})


_NO_FILE = 3  # job_read_record.sh: the file does not exist


def _validation_summary(exc: ValidationError) -> str:
    """Which fields are missing and which have the wrong shape, in one line."""
    missing = [str(e["loc"][0]) for e in exc.errors() if e["type"] == "missing" and e["loc"]]
    wrong = [f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors() if e["type"] != "missing"]
    parts = ([f"missing fields: {', '.join(missing)}"] if missing else []) + wrong[:5]
    return "; ".join(parts)


async def read_run_record(host: Host, durable_root: str, run_id: str) -> RunRecord:
    """The run.json of one run, validated; a clear error when it is missing, not JSON, or
    not a run record."""
    shown = f"{run_dir_path(durable_root, check_run_id(run_id))}/run.json"
    res = await host.run(scripts.command_words("job_read_record", path_word(shown, "run.json")), timeout=20)
    if res.exit_status == _NO_FILE:
        raise NotFoundError(f"no run {run_id} on this box: {shown} does not exist", host=host.name,
                            path=shown, next_step="list_runs shows the runs on the box")
    res.check(f"reading {shown}")
    try:
        return RunRecord.model_validate_json(res.stdout)
    except ValidationError as exc:
        problem = ("is not valid JSON" if exc.errors()[0]["type"] == "json_invalid"
                   else "is not a run record (written by hand, or damaged)")
        raise InputError(
            f"run.json of run {run_id} {problem}", host=host.name, path=shown, observed=_validation_summary(exc),
            expected="the run.json launch_detached wrote (schema remote-gpu-trainer/run/v1)",
            next_step="restore the file or relaunch the run; verify_artifacts also takes root and roster directly",
        ) from None


async def declared_outputs(host: Host, durable_root: str, run_id: str) -> RunOutputs:
    """The outputs a run declared at launch (its run.json): what verify_artifacts pulls by default."""
    record = await read_run_record(host, durable_root, run_id)
    if record.outputs is None:
        raise InputError(f"run {run_id} declared no outputs", host=host.name,
                         next_step="pass root and roster (the files that must exist)")
    return record.outputs
