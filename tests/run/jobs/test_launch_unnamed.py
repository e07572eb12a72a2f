"""Two identical launch_detached calls without a name start two jobs (a retry is a second run),
which is why the tool does not claim to be idempotent: through a real MCP client on the local box."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Caller, Env, hints, structured


@pytest.fixture
def local_box(env: Env, tmp_path: Path) -> Iterator[Path]:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable)}})
    yield durable
    for pid in durable.glob(".rgt/runs/*/pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid.read_text()), signal.SIGKILL)


async def test_two_identical_unnamed_launches_start_two_runs_and_the_tool_says_it_is_not_idempotent(
        local_box: Path, client: Caller) -> None:
    call: dict[str, Any] = {"host": "gpu1", "command": "sleep 60", "probe_s": 0}
    async with client.session() as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        first = structured(await c.call_tool("launch_detached", call))["outcomes"][0]["launch"]
        second = structured(await c.call_tool("launch_detached", call))["outcomes"][0]["launch"]
        listed = structured(await c.call_tool("list_runs", {"host": "gpu1"}))["outcomes"][0]["runs"]["runs"]
    assert first["outcome"] == second["outcome"] == "running"
    assert first["run_id"] != second["run_id"]
    running = {r["run_id"] for r in listed if r["status"] == "running"}
    assert {first["run_id"], second["run_id"]} <= running
    assert len(list((local_box / ".rgt" / "runs").iterdir())) == 2
    read_only, _, idempotent, _ = hints(tools["launch_detached"].annotations)
    assert read_only is False
    assert not idempotent, "a repeated unnamed launch is a second job, so never idempotent"
