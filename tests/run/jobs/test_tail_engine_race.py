"""tail_logs on a run whose engine keeps its own state (Slurm): the run may end between the log
read and the queue's answer. The text must then hold the run's last lines, never an older window
next to a newer "succeeded" (a clean-clone run read a sweep cell that way)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_server.hosts.local import LocalHost
from mcp_server.hosts.pool import HostPool
from mcp_server.redact import Redactor
from mcp_server.run.jobs import logs
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.status import RunState
from mcp_server.settings import Settings


def _slurm_run(durable: Path) -> Path:
    run = durable / ".rgt" / "runs" / "run-race"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "run-race", "backend": "slurm"}))
    (run / "log").write_text("# rgt: run run-race started\nstep 1\n")
    return run


async def test_a_run_that_ends_between_the_log_read_and_the_queues_answer_is_read_again(
        env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env.write_inventory({"box": {"destination": "local", "durable_root": str(tmp_path)}})
    spec = HostPool(Settings.from_env()).spec("box")
    run = _slurm_run(tmp_path)
    asked: list[int] = []

    async def status(host: Any, dirs: list[str]) -> list[RunState]:
        asked.append(1)
        if len(asked) == 1:  # the job finishes while Slurm is asked: its last line, then its exit file
            with (run / "log").open("a") as f:
                f.write("cell 2 done\n")
            (run / "exit_code").write_text("0\n")
        return [RunState(status="succeeded", exit_code=0, evidence=["Slurm job 7 is COMPLETED"])]

    monkeypatch.setattr(type(ENGINES["slurm"]), "status", staticmethod(status))
    result = await logs.tail_logs(LocalHost(), spec, redactor=Redactor(), run_id="run-race")
    assert result.state is not None and result.state.status == "succeeded"
    assert "cell 2 done" in result.text, "the text is read after the run ended, like its state"
    assert len(asked) == 1


async def test_a_running_slurm_job_costs_no_second_read(env: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env.write_inventory({"box": {"destination": "local", "durable_root": str(tmp_path)}})
    spec = HostPool(Settings.from_env()).spec("box")
    _slurm_run(tmp_path)
    reads: list[int] = []
    real = logs._read_window

    async def counted(*args: Any) -> Any:
        reads.append(1)
        return await real(*args)

    async def status(host: Any, dirs: list[str]) -> list[RunState]:
        return [RunState(status="running", evidence=["Slurm job 7 is RUNNING"])]

    monkeypatch.setattr(logs, "_read_window", counted)
    monkeypatch.setattr(type(ENGINES["slurm"]), "status", staticmethod(status))
    result = await logs.tail_logs(LocalHost(), spec, redactor=Redactor(), run_id="run-race")
    assert result.state is not None and result.state.status == "running" and len(reads) == 1
