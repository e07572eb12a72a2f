"""A connection lost while the launch's start is on the box leaves the outcome unknown: the job
may have started. The error says so and points at list_runs, never a bare "retry", which for an
unnamed launch could start a second job (issue 20, item 8)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from tests.conftest import error_text, structured


async def test_a_connection_lost_during_the_start_says_the_outcome_is_unknown(env, box, client,
                                                                              tmp_path: Path) -> None:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(durable)}})
    launching = asyncio.ensure_future(client.call_tool("launch_detached", {
        "host": "gpu1", "command": "echo started; sleep 60", "probe_s": 8}))
    await asyncio.sleep(2.5)  # the start is probing on the box by now
    box.drop_sessions()
    text = error_text(await launching)
    assert "outcome is unknown" in text and "list_runs" in text, text
    assert "HOST_UNREACHABLE" in text
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    assert "run-" in str(listed), "the job had started: list_runs finds it"
    for pid in durable.glob(".rgt/runs/*/pid"):
        os.killpg(int(pid.read_text()), signal.SIGKILL)
