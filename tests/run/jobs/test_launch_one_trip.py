"""A launch in a place whose facts this server read a moment ago is one round trip: the start
checks on the box what could have changed (the durable root and the workdir still resolve to the
same paths), runs the disk gate and reads the code's git state itself. Each assumption is broken
here on purpose, on LocalHost and over the test sshd."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import GateRefused
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, launch
from mcp_server.run.jobs.launch_facts import remember, remembered
from tests.run.jobs.conftest import CountingHost, JobBox


class Place:
    """A box whose pooled host counts round trips (the facts are remembered per host object)."""

    def __init__(self, box: JobBox) -> None:
        self.app, self.spec, self.durable = box.app, box.spec, box.durable
        self.root, self.host = box.durable.parent, CountingHost(box.host)

    async def launch(self, **fields: Any) -> LaunchResult:
        req = LaunchRequest(probe_s=0, **{"command": "sleep 30", **fields})
        return await launch(self.host, self.spec, req, ledger=None, redactor=self.app.redactor)  # type: ignore[arg-type]

    def record(self, result: LaunchResult) -> dict[str, Any]:
        return json.loads((Path(result.run_dir) / "run.json").read_text())


@pytest.fixture
def place(job_box: JobBox) -> Place:
    return Place(job_box)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


async def test_a_second_launch_in_the_same_place_is_one_round_trip(place: Place) -> None:
    work = place.root / "work"
    work.mkdir()
    first = await place.launch(workdir=str(work))
    assert place.host.calls == 2 and first.outcome == "running"
    second = await place.launch(workdir=str(work))
    assert place.host.calls == 3, "the facts were remembered: the start alone"
    assert second.outcome == "running" and second.run_id != first.run_id
    assert place.record(second)["workdir"] == str(work.resolve())


async def test_the_code_state_is_read_as_each_run_starts(place: Place) -> None:
    repo = place.root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "train.py").write_text("print(1)\n")
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "one")
    first = await place.launch(workdir=str(repo))
    assert place.record(first)["git_commit"] == git(repo, "rev-parse", "HEAD")
    assert place.record(first)["git_dirty"] is False
    (repo / "train.py").write_text("print(2)\n")
    git(repo, "commit", "-q", "-am", "two")
    (repo / "train.py").write_text("print(3)\n")  # and an uncommitted change on top
    calls = place.host.calls
    second = await place.launch(workdir=str(repo))
    assert place.host.calls == calls + 1
    record = place.record(second)
    assert record["git_commit"] == git(repo, "rev-parse", "HEAD") != place.record(first)["git_commit"]
    assert record["git_dirty"] is True
    assert record["run_id"] == second.run_id and record["command"] == "sleep 30", "the rest of the record intact"


async def test_a_workdir_that_now_resolves_elsewhere_is_read_again(place: Place) -> None:
    a, b, link = place.root / "a", place.root / "b", place.root / "current"
    a.mkdir()
    b.mkdir()
    link.symlink_to(a)
    first = await place.launch(workdir=str(link))
    assert place.record(first)["workdir"] == str(a.resolve())
    link.unlink()
    link.symlink_to(b)
    calls = place.host.calls
    second = await place.launch(workdir=str(link))
    assert place.record(second)["workdir"] == str(b.resolve()), "never the remembered, stale path"
    assert place.host.calls == calls + 3, "the start refused, the facts were read, the start ran"
    runs = sorted(p.name for p in (place.durable / ".rgt" / "runs").iterdir())
    assert runs == sorted([first.run_id, second.run_id]), "the refused start left nothing"


async def test_the_disk_gate_holds_on_remembered_facts(place: Place) -> None:
    await place.launch()
    calls = place.host.calls
    with pytest.raises(GateRefused) as refused:
        await place.launch(min_free_gib=10**9)
    assert "disk gate" in str(refused.value) and "GiB free" in str(refused.value)
    assert place.host.calls == calls + 1
    assert len(list((place.durable / ".rgt" / "runs").iterdir())) == 1, "nothing was started"


async def test_a_live_name_on_remembered_facts_returns_the_live_run(place: Place) -> None:
    first = await place.launch(name="train-a")
    calls = place.host.calls
    again = await place.launch(name="train-a")
    assert again.outcome == "already_running" and again.run_id == first.run_id
    assert place.host.calls == calls + 1


async def test_a_tool_missing_from_remembered_facts_is_looked_for_again(place: Place) -> None:
    """tmux installed (prepare_box) after a launch that found none: the facts are read again,
    never a refusal from what the box was minutes ago."""
    await place.launch()
    req = LaunchRequest(command="sleep 30", backend="tmux", probe_s=0)
    facts = remembered(place.host, place.spec, req)  # type: ignore[arg-type]
    assert facts is not None and facts.get("tmux")
    remember(place.host, place.spec, req, {**facts, "tmux": ""})  # type: ignore[arg-type]
    calls = place.host.calls
    run = await place.launch(backend="tmux")
    assert run.backend == "tmux" and run.outcome == "running"
    assert place.host.calls == calls + 2, "the facts were read again, then the start"
    subprocess.run(["tmux", "kill-session", "-t", run.tmux_session or ""], capture_output=True, check=False)
