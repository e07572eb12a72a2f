"""The on-box queue checks the disk floor (free bytes and inodes on the durable root) before EACH
cell, not only when the queue is created: a cell that would start below the floor is held, says
why (tail_logs, list_runs, its log), and starts once space is freed. Through the real MCP client,
on LocalHost and over the test sshd."""

from __future__ import annotations

import os
import shutil

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until, until_sync

MARGIN = 3000  # inodes between the floor and what is free at launch
FILL = 8000  # inodes the first cell uses up: the second would start well below the floor


async def test_a_cell_is_held_while_the_disk_is_below_the_floor_and_starts_once_freed(durable_box: Box,
                                                                                      client) -> None:
    fill, started = durable_box.work / "fill", durable_box.work / "started-2"
    floor = os.statvfs(durable_box.durable).f_favail - MARGIN
    queue = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": [f"mkdir {fill} && cd {fill} && seq {FILL} | xargs touch", f"touch {started}"],
        "max_concurrent": 1, "min_free_gib": 0, "min_free_inodes": floor, "probe_s": 0,
        "workdir": str(durable_box.work)}))["queue"]
    second = queue["runs"][1]["run_id"]
    held = durable_box.durable / ".rgt" / "runs" / second / "held"
    try:
        until_sync(held.is_file, timeout=30, what="the second cell to be held")
        assert "inodes free < floor" in held.read_text() and not started.exists()
        tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": second}))
        assert tail["state"]["status"] == "queued"
        assert any("below the launch floor" in e and "inodes free" in e for e in tail["state"]["evidence"])
        assert "held before starting" in tail["text"]
        listed = structured(await client.call_tool("list_runs", {"host": "gpu1", "state": ["queued"]}))
        assert [r["run_id"] for r in listed["outcomes"][0]["runs"]["runs"]] == [second]
    finally:
        shutil.rmtree(fill, ignore_errors=True)
    await until(lambda: started.exists(), timeout=30, what="the held cell to start once space is freed")
    assert not held.exists()
    done = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": second, "timeout_s": 20}))
    assert done["state"]["status"] == "succeeded"


async def test_a_queue_above_the_floor_never_holds_a_cell(durable_box: Box, client) -> None:
    queue = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": ["true", "true"], "max_concurrent": 1, "probe_s": 0}))["queue"]
    runs = durable_box.durable / ".rgt" / "runs"
    for r in queue["runs"]:
        until_sync(lambda r=r: (runs / r["run_id"] / "exit_code").is_file(), what="each cell to end")
        assert not (runs / r["run_id"] / "held").exists()
