"""Each run-dir engine behind the JobEngine protocol, for real on LocalHost and over the test sshd:
submit (through a launch), status of many runs in one round trip, list, log location, cancel."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from mcp_server.errors import NotFoundError
from mcp_server.run.jobs.cancel import cancel_run
from mcp_server.run.jobs.engines import ENGINES, own_state
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, launch
from tests.run.jobs.conftest import CountingHost, group_alive
from tests.run.jobs.conftest import JobBox as Box
from tests.support.wait import until, until_sync

# The engines whose runs are processes on the host itself; Slurm has its own tests against a real
# Slurm (test_slurm.py).
ENGINE_NAMES = sorted(n for n in ENGINES if not own_state(n))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def tmux_session_exists(name: str) -> bool:
    return subprocess.run(["tmux", "has-session", "-t", name], capture_output=True, check=False).returncode == 0


async def start(box: Box, command: str, engine: str = "shell") -> LaunchResult:
    req = LaunchRequest(command=command, backend=engine, probe_s=0)  # type: ignore[arg-type]
    return await launch(box.host, box.spec, req, ledger=None, redactor=box.app.redactor)


def until_text(path: Path) -> str:
    return until_sync(lambda: path.is_file() and path.read_text().strip(), what=f"{path.name} to be written")


def recorded_pid(run: LaunchResult) -> int:
    return int(until_text(Path(run.run_dir) / "pid"))


@pytest.mark.parametrize("engine", ENGINE_NAMES)
async def test_cancel_stops_the_whole_process_group_and_the_run_reads_as_cancelled(job_box: Box, engine: str) -> None:
    run = await start(job_box, "sleep 300 & sleep 300; wait", engine)
    pgid = recorded_pid(run)
    assert group_alive(pgid)
    result = await cancel_run(job_box.host, job_box.spec, run.run_id, by="test")
    # The wrapper outlives the TERM and records the command's 143 (128 + SIGTERM) before it exits.
    assert result.changed and result.state.status == "cancelled" and result.state.exit_code == 143
    await until(lambda: not group_alive(pgid), what="the run's process group to be gone")
    if engine == "tmux":
        assert run.tmux_session and not tmux_session_exists(run.tmux_session)
    (again,) = await ENGINES[engine].status(job_box.host, [f"{job_box.spec.durable_root}/.rgt/runs/{run.run_id}"])
    assert again.status == "cancelled"


async def test_cancelling_a_run_that_is_not_there_is_not_found(job_box: Box) -> None:
    with pytest.raises(NotFoundError, match="run.json does not exist"):
        await cancel_run(job_box.host, job_box.spec, "nope-20260101-000000-abcdef")


@pytest.mark.parametrize("engine", ENGINE_NAMES)
async def test_status_reads_many_runs_in_one_round_trip_in_order(job_box: Box, engine: str) -> None:
    failed = await start(job_box, "exit 3", engine)
    running = await start(job_box, "sleep 300", engine)
    runs_dir = f"{job_box.spec.durable_root}/.rgt/runs"
    until_text(Path(failed.run_dir) / "exit_code")
    counting = CountingHost(job_box.host)
    states = await ENGINES[engine].status(counting, [f"{runs_dir}/{failed.run_id}", f"{runs_dir}/{running.run_id}",
                                                     f"{runs_dir}/never-launched"])
    assert [(s.status, s.exit_code) for s in states] == [("failed", 3), ("running", None), ("lost", None)]
    assert counting.calls == 1
    assert await ENGINES[engine].status(counting, []) == [] and counting.calls == 1


async def test_each_engine_lists_the_runs_it_owns(job_box: Box) -> None:
    by_shell = await start(job_box, "sleep 300", "shell")
    by_tmux = await start(job_box, "sleep 300", "tmux")
    foreign = job_box.durable / ".rgt" / "runs" / "by-hand-1"
    foreign.mkdir()
    (foreign / "run.json").write_text('{"run_id": "by-hand-1", "command": "x"}')  # names no engine
    (job_box.durable / ".rgt" / "runs" / "queue-q-1").mkdir()
    listed = {name: await engine.list(job_box.host, job_box.spec.durable_root, 200) for name, engine in ENGINES.items()}
    assert [r.run_id for r in listed["shell"]] == sorted([by_shell.run_id, "by-hand-1"])
    assert [r.run_id for r in listed["tmux"]] == [by_tmux.run_id]
    (tmux_run,) = listed["tmux"]
    assert tmux_run.record.command == "sleep 300"
    assert tmux_run.run_dir == f"{job_box.spec.durable_root}/.rgt/runs/{by_tmux.run_id}"
    last = await ENGINES["shell"].list(job_box.host, job_box.spec.durable_root, 1)
    assert [r.run_id for r in last] == sorted([by_shell.run_id, "by-hand-1"])[-1:]


def test_every_engine_is_registered_under_its_name_and_logs_into_its_run_dir() -> None:
    for name, engine in ENGINES.items():
        assert engine.name == name
        assert engine.log_path("/data/.rgt/runs/r-1") == "/data/.rgt/runs/r-1/log"
        assert "rgt_submit()" in engine.submit_functions() and "rgt_cancel()" in engine.submit_functions()
    assert ENGINES["tmux"].job_name("a.b-1") == "rgt-a_b-1" and ENGINES["shell"].job_name("a.b-1") is None
