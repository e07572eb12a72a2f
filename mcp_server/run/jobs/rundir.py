"""The run directory on the box: the source of truth for a detached job.

<durable_root>/.rgt/
  runs/<run_id>/   run.json  wrapper.sh  cmd.sh  env.sh  log  pid  boot_id  oom_base
                   exit_code  ended_at  (both written by the wrapper, tmp + rename)
  names/<name>     the run id last launched under that name
  locks/<name>/    held while a launch of that name is in progress (mkdir is atomic)
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from mcp_server.errors import InputError
from mcp_server.hosts.commands import check_name, path_word

RunStatus = Literal["queued", "running", "succeeded", "failed", "lost", "unknown"]
Backend = Literal["shell", "tmux"]
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def new_run_id(name: str | None, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now or time.time()))
    return f"{name or 'run'}-{stamp}-{secrets.token_hex(3)}"


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID_RE.match(run_id) or ".." in run_id:
        raise InputError("run_id is not a valid run id", observed=run_id,
                         expected="the run_id returned by launch_detached or list_runs")
    return run_id


@dataclass(frozen=True)
class RunPaths:
    """Where a run's files live on its box (shell words, already quoted)."""

    durable_root: str
    run_id: str

    @property
    def base(self) -> str:
        return path_word(self.durable_root.rstrip("/") + "/.rgt", "durable root")

    @property
    def runs(self) -> str:
        return f"{self.base}/runs"

    @property
    def dir(self) -> str:
        return f"{self.base}/runs/{check_run_id(self.run_id)}"

    def file(self, name: str) -> str:
        return f"{self.dir}/{name}"

    def name_file(self, name: str) -> str:
        return f"{self.base}/names/{check_name(name, 'run name')}"

    def lock_dir(self, name: str) -> str:
        return f"{self.base}/locks/{check_name(name, 'run name')}"


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
    host_facts: dict[str, str] = Field(default_factory=dict)
    queue_id: str | None = None
    outputs: RunOutputs | None = None
    server_version: str

    model_config = {"populate_by_name": True}
